package file

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

// A slot file is a lock file in every respect: a link, a hard link or a
// FIFO planted in its place is refused and its target left alone.
func TestSemaphorePlantedSlotFilesAreRefused(t *testing.T) {
	d := dir(t, 0o700, 0)
	victim := filepath.Join(t.TempDir(), "shadow")
	os.WriteFile(victim, []byte("root:secret\n"), 0o600)
	b, _ := Open(d)
	for name, plant := range map[string]func(string) error{
		"sym":  func(p string) error { return os.Symlink(victim, p) },
		"hard": func(p string) error { return os.Link(victim, p) },
		"fifo": func(p string) error { return syscall.Mkfifo(p, 0o666) },
	} {
		key := "k-" + name
		if err := plant(b.slotPath(key, 0)); err != nil {
			t.Fatal(err)
		}
		if l, err := b.Acquire(t.Context(), key, semOpts("r", 2)); !errors.Is(err, backend.ErrPermission) {
			t.Errorf("Acquire over a planted %s slot file = %v, %v; want ErrPermission", name, l, err)
		}
	}
	fi, _ := os.Stat(victim)
	if content, _ := os.ReadFile(victim); fi.Mode().Perm() != 0o600 || string(content) != "root:secret\n" {
		t.Errorf("the link's target was changed: mode %v, content %q", fi.Mode(), content)
	}
}

// A slot file, or a key's lock file, of other data is never written to.
func TestSemaphoreForeignFilesAreNeverWritten(t *testing.T) {
	b, _ := Open(dir(t, 0o700, 0))
	for _, p := range []string{b.slotPath("k", 0), b.path("other")} {
		os.WriteFile(p, []byte("not a lock\n"), 0o600)
	}
	for _, key := range []string{"k", "other"} {
		if _, err := b.Acquire(t.Context(), key, semOpts("r", 2)); !errors.Is(err, backend.ErrPermission) {
			t.Errorf("semaphore Acquire of %s over a file of other data = %v, want ErrPermission", key, err)
		}
	}
	for _, p := range []string{b.slotPath("k", 0), b.path("other")} {
		if got, _ := os.ReadFile(p); string(got) != "not a lock\n" {
			t.Errorf("%s now holds %q", filepath.Base(p), got)
		}
	}
}

// Slot files get the lock files' modes, whatever the umask: 0600, and 0660
// in a directory shared with a group.
func TestSemaphoreSlotFilesModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	for mode, want := range map[os.FileMode]os.FileMode{0o700: 0o600, 0o770 | os.ModeSetgid | os.ModeSticky: 0o660} {
		d := dir(t, mode, 0)
		b, _ := Open(d)
		l1 := backendtest.MustAcquire(t, b, "k", semOpts("a", 2))
		l2 := backendtest.MustAcquire(t, b, "k", semOpts("b", 2))
		l1.Release(t.Context())
		l2.Release(t.Context())
		for _, p := range []string{b.path("k"), b.slotPath("k", 0), b.slotPath("k", 1)} {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
				t.Errorf("%s in a %v directory: %v, %v; want mode %v", filepath.Base(p), mode, fi, err, want)
			}
		}
	}
}

// In a directory anyone may write to, another user's slot file (which its
// owner could remove under our job, or hold flocked to take a slot for
// good) is refused; in one shared with a group it is used as it is.
func TestSemaphoreAnotherUsersSlotFile(t *testing.T) {
	for mode, ok := range map[os.FileMode]bool{0o777 | os.ModeSticky: false, 0o770 | os.ModeSetgid | os.ModeSticky: true} {
		d := dir(t, mode, 0)
		b, _ := Open(d)
		p := b.slotPath("k", 0)
		os.WriteFile(p, nil, 0o660)
		os.Chown(p, nobody, 0)
		os.Chmod(p, 0o660)
		l, err := b.Acquire(t.Context(), "k", semOpts("r", 2))
		if ok != (err == nil) || err != nil && !errors.Is(err, backend.ErrPermission) {
			t.Errorf("another user's slot file in a %v directory: %v", mode, err)
		}
		if l != nil {
			l.Release(t.Context())
		}
		var st syscall.Stat_t
		syscall.Stat(p, &st)
		if st.Uid != nobody || st.Mode&0o777 != 0o660 {
			t.Errorf("slot file now owned by %d with mode %o; want it left as it was", st.Uid, st.Mode&0o777)
		}
	}
}

// Another local user, who may read the lock directory but not write its
// files, can neither take a slot nor break one: the test binary, run as
// nobody, tries.
func TestSemaphoreAnotherUserCannotTakeOrBreakASlot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	bin := filepath.Join(dir(t, 0o755, 0), "file.test")
	if err := copyFile(os.Args[0], bin, 0o755); err != nil {
		t.Fatal(err)
	}
	d := dir(t, 0o755, 0)
	os.Chmod(filepath.Dir(filepath.Dir(d)), 0o755) // the test's own temporary directory, for nobody to pass
	b, _ := Open(d)
	l := backendtest.MustAcquire(t, b, "k", semOpts("r", 2))
	defer l.Release(t.Context())
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s k %d", attackEnv, d, l.Token()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	if want := "acquire refused\nrelease refused\nforce refused\n"; string(out) != want {
		t.Errorf("as nobody:\n%s\nwant:\n%s", out, want)
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Errorf("the holder's Renew after another user's attempts: %v", err)
	}
	if st, _ := b.Inspect(t.Context(), "k"); len(st.Holders) != 1 || st.Token != l.Token() {
		t.Errorf("Inspect after another user's attempts = %+v", st)
	}
}

func copyFile(from, to string, mode os.FileMode) error {
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, mode)
	}
	return err
}
