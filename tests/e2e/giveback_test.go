package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A command that cannot start once the lock is held (its interpreter is
// missing: 127; no format the kernel runs: 126) ran nothing, so its
// --min-hold must not keep the lock: on a fleet every other host would
// skip that schedule. The next run takes the lock at once.
func TestUnstartedCommandLeavesNoMinHold(t *testing.T) {
	dir := t.TempDir()
	noInterp := filepath.Join(dir, "no-interpreter")
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(noInterp, []byte("#!/no/such/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(garbage, []byte{0, 1, 2, 3}, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, srv := range everyBackend() {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			e := envFor(srv.url(t))
			for cmd, want := range map[string]int{noInterp: 127, garbage: 126} {
				key := "nightly-" + filepath.Base(cmd)
				if r := run(t, e, "run", "--min-hold", "1m", key, "--", cmd); r.Code != want {
					t.Fatalf("%s: exit %d, stderr %q; want %d", cmd, r.Code, r.Stderr, want)
				}
				began := time.Now()
				r := run(t, e, "run", "--min-hold", "1m", key, "--", "true")
				if r.Code != 0 {
					t.Errorf("after %s (exit %d) with --min-hold 1m, the next run: exit %d, %s; want the lock free at once",
						filepath.Base(cmd), want, r.Code, strings.TrimSpace(r.Stderr))
				}
				if took := time.Since(began); took > 10*time.Second {
					t.Errorf("the next run took %v", took)
				}
			}
		})
	}
}
