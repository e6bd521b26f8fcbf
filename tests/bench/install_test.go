package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestInstallCopiesTheProgramsUncached: the programs beside the binary
// are copied, byte for byte and executable, other files are not, and no
// page of a copy is left in the page cache for its first run to find.
func TestInstallCopiesTheProgramsUncached(t *testing.T) {
	src := t.TempDir()
	body := bytes.Repeat([]byte("#!/bin/true\n"), 100_000) // 1.2 MB: many pages
	for name, mode := range map[string]os.FileMode{"lockrun": 0o755, "lockrun-watchdog": 0o755, "lockrun.1": 0o644} {
		if err := os.WriteFile(filepath.Join(src, name), body, mode); err != nil {
			t.Fatal(err)
		}
	}
	got := install(t, filepath.Join(src, "lockrun"))
	dir := filepath.Dir(got)
	if filepath.Base(got) != "lockrun" || dir == src {
		t.Fatalf("install = %s, want a lockrun in a directory of its own", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "lockrun.1")); err == nil {
		t.Error("the man page was copied with the programs")
	}
	for _, name := range []string{"lockrun", "lockrun-watchdog"} {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || fi.Mode()&0o111 == 0 {
			t.Fatalf("%s: %v, mode %v; want an executable copy", name, err, fi.Mode())
		}
		if resident, err := cachedPages(p); err != nil || resident > 0 {
			t.Errorf("%s: %d pages of the copy are cached (%v)", name, resident, err)
		}
		if b, _ := os.ReadFile(p); !bytes.Equal(b, body) {
			t.Errorf("%s: the copy differs from the program", name)
		}
	}
}
