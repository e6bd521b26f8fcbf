package file

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

// dir makes a directory with mode and owner under a root-owned 0755 one.
func dir(t *testing.T, mode os.FileMode, uid int) string {
	t.Helper()
	parent := t.TempDir()
	os.Chmod(parent, 0o755)
	d := filepath.Join(parent, "locks")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, uid, uid); err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, mode)
	return d
}

func TestOnlyDirectoriesNoOneElseCanChangeAreUsed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give directories away")
	}
	trusted := dir(t, 0o770|os.ModeSetgid|os.ModeSticky, 0)
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(trusted, link)
	planted := filepath.Join(dir(t, 0o777|os.ModeSticky, 0), "link") // a link another user made in a sticky directory
	os.Symlink(trusted, planted)
	os.Lchown(planted, nobody, nobody)
	cases := map[string]bool{
		trusted:                          true,
		link:                             true, // our own link, in our own directory
		dir(t, 0o700, 0):                 true,
		dir(t, 0o770|os.ModeSetgid, 0):   true,
		dir(t, 0o777|os.ModeSticky, 0):   true,
		planted:                          false,
		dir(t, 0o700, nobody):            false, // another user's
		dir(t, 0o777, 0):                 false, // anyone may replace its files
		dir(t, 0o770, 0):                 false, // group-writable without setgid
		dir(t, 0o755, nobody) + "/sub":   false, // below another user's directory
		dir(t, 0o777, 0) + "/sub/deeper": false, // below a directory anyone may change
	}
	for d, want := range cases {
		_, err := Open(d)
		if got := err == nil; got != want || err != nil && !errors.Is(err, backend.ErrPermission) {
			t.Errorf("Open(%s) = %v; want trusted: %v, else ErrPermission", d, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(trusted, "sub")); err == nil {
		t.Error("a directory was created behind a refused path")
	}
}

func TestDefaultDirectoryMustBeOursAlone(t *testing.T) {
	d := dir(t, 0o700, 0)
	if _, err := verifyDir(d, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode os.FileMode
		uid  int
	}{{0o777, nobody}, {0o700, nobody}, {0o770, os.Geteuid()}} {
		d := dir(t, c.mode, c.uid)
		info, err := verifyDir(d, false)
		if err == nil {
			err = privateOK(info)
		}
		if !errors.Is(err, backend.ErrPermission) {
			t.Errorf("private directory mode %v uid %d: %v, want ErrPermission", c.mode, c.uid, err)
		}
	}
	if DefaultDir() != RootDir && os.Geteuid() == 0 {
		t.Errorf("root's default directory %s, want %s", DefaultDir(), RootDir)
	}
}

func TestLockFilesAreNeverWorldWritable(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	for mode, want := range map[os.FileMode]os.FileMode{0o700: 0o600, 0o770 | os.ModeSetgid | os.ModeSticky: 0o660} {
		d := dir(t, mode, 0)
		b, err := Open(d)
		if err != nil {
			t.Fatal(err)
		}
		backendtest.MustAcquire(t, b, "k", opts("r")).Release(t.Context())
		if fi, err := os.Stat(filepath.Join(d, "k.lock")); err != nil || fi.Mode().Perm() != want {
			t.Errorf("lock file in a %v directory: %v, %v; want mode %v", mode, fi.Mode(), err, want)
		}
	}
	// An old lockrun's 0666 file of ours is mended; another user's is refused.
	d := dir(t, 0o700, 0)
	b, _ := Open(d)
	for owner, ok := range map[int]bool{os.Geteuid(): true, nobody: false} {
		p := filepath.Join(d, "old.lock")
		os.Remove(p)
		os.WriteFile(p, nil, 0o666)
		os.Chown(p, owner, owner)
		l, err := b.Acquire(t.Context(), "old", opts("r"))
		if ok != (err == nil) || err != nil && !errors.Is(err, backend.ErrPermission) {
			t.Errorf("a 0666 lock file of uid %d: %v", owner, err)
		}
		if l != nil {
			l.Release(t.Context())
			if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
				t.Errorf("our old 0666 lock file is still %v", fi.Mode())
			}
		}
	}
}

// In a directory anyone may write to, a lock file of another user is theirs
// to remove under our job: refused. In one shared with a group, it is used
// as it is, never re-moded or chowned.
func TestAnotherUsersLockFile(t *testing.T) {
	for mode, ok := range map[os.FileMode]bool{0o777 | os.ModeSticky: false, 0o770 | os.ModeSetgid | os.ModeSticky: true} {
		d := dir(t, mode, 0)
		p := filepath.Join(d, "k.lock")
		os.WriteFile(p, nil, 0o660)
		os.Chown(p, nobody, 0)
		os.Chmod(p, 0o660)
		b, err := Open(d)
		if err != nil {
			t.Fatal(err)
		}
		l, err := b.Acquire(t.Context(), "k", opts("r"))
		if ok != (err == nil) || err != nil && !errors.Is(err, backend.ErrPermission) {
			t.Errorf("another user's lock file in a %v directory: %v", mode, err)
			continue
		}
		if l != nil {
			l.Release(t.Context())
		}
		var st syscall.Stat_t
		syscall.Stat(p, &st)
		if st.Uid != nobody || st.Mode&0o777 != 0o660 {
			t.Errorf("lock file now owned by %d with mode %o; want it left as it was", st.Uid, st.Mode&0o777)
		}
	}
}

func TestForeignFileIsNeverWritten(t *testing.T) {
	d := dir(t, 0o700, 0)
	p := filepath.Join(d, "k.lock")
	os.WriteFile(p, []byte("not a lock\n"), 0o600)
	b, _ := Open(d)
	if _, err := b.Acquire(t.Context(), "k", opts("r")); !errors.Is(err, backend.ErrPermission) {
		t.Errorf("Acquire on a file of other data = %v, want ErrPermission", err)
	}
	if err := b.ForceRelease(t.Context(), "k"); err != nil && !errors.Is(err, backend.ErrUnavailable) && !errors.Is(err, backend.ErrPermission) {
		t.Errorf("ForceRelease on a file of other data = %v", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "not a lock\n" {
		t.Errorf("file now holds %q", got)
	}
}

func TestTokenNeverWraps(t *testing.T) {
	b, _ := Open(t.TempDir())
	backendtest.MustAcquire(t, b, "k", opts("r")).Release(t.Context())
	f, err := os.OpenFile(b.path("k"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, slot, _ := readState(f)
	writeState(f, record{Token: math.MaxUint64 - 1, RunID: "x"}, slot)
	f.Close()
	l := backendtest.MustAcquire(t, b, "k", opts("r"))
	if l.Token() != math.MaxUint64 {
		t.Errorf("token %d, want %d", l.Token(), uint64(math.MaxUint64))
	}
	l.Release(t.Context())
	if l, err := b.Acquire(t.Context(), "k", opts("r")); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Acquire past the last token = %v, %v; want ErrUnavailable (exit 69), never a wrap", l, err)
	}
}

// A lock file removed under a lease is reported at once, without waiting
// for a renewal; so is a revocation.
func TestDoneReportsRemovalAndRevocationAtOnce(t *testing.T) {
	b, _ := Open(t.TempDir())
	for name, attack := range map[string]func(){
		"removed":  func() { os.Remove(b.path("k")) },
		"replaced": func() { os.WriteFile(b.path("new"), nil, 0o600); os.Rename(b.path("new"), b.path("k")) },
		"revoked":  func() { b.ForceRelease(t.Context(), "k") },
	} {
		l := backendtest.MustAcquire(t, b, "k", opts("r-"+name))
		done := l.(*lease).Done()
		// Our own renewals stamp the file: they must not count as a loss.
		for range 3 {
			if err := l.Renew(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-done:
			t.Fatalf("%s: Done before anything happened", name)
		case <-time.After(50 * time.Millisecond):
		}
		attack()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Errorf("%s: Done not closed 5s after the lock file was %s", name, name)
		}
		if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Errorf("%s: Renew = %v, want ErrLost", name, err)
		}
		l.Release(t.Context())
		os.Remove(b.path("k"))
	}
}
