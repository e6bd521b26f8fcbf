package file

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	backendtest.Run(t, backendtest.Harness{
		Open: func(t *testing.T) backend.Backend {
			b, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		Crash: func(t *testing.T, l backend.Lease) { l.(*lease).abandon() },
		TTL:   time.Second,
	})
}

func opts(run string) backend.AcquireOptions {
	return backend.AcquireOptions{TTL: time.Second, Holder: "h", RunID: run}
}

func TestTokenSurvivesRestartsAndNeverFallsBelowTheClock(t *testing.T) {
	dir := t.TempDir()
	var last backend.Token
	for i := range 3 {
		b, err := Open(dir) // a new process each time, as far as the backend knows
		if err != nil {
			t.Fatal(err)
		}
		before := backend.Token(time.Now().UnixMicro())
		l, err := b.Acquire(t.Context(), "k", opts("r"))
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last || l.Token() < before {
			t.Fatalf("run %d: token %d, last %d, clock %d", i, l.Token(), last, before)
		}
		last = l.Token()
		l.Release(t.Context())
	}
}

func TestTornSlotFallsBackToTheOtherOne(t *testing.T) {
	dir := t.TempDir()
	b, _ := Open(dir)
	var tokens []backend.Token
	for range 2 {
		l, err := b.Acquire(t.Context(), "k", opts("r"))
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, l.Token())
		l.Release(t.Context())
	}
	// A crash in the middle of writing the newest slot leaves garbage.
	f, err := os.OpenFile(filepath.Join(dir, "k.lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, slot, _ := readState(f)
	f.WriteAt([]byte(`{"token":1`), int64(slot*slotSize))
	f.Close()
	l, err := b.Acquire(t.Context(), "k", opts("r"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(t.Context())
	if l.Token() <= tokens[0] {
		t.Errorf("token %d after a torn write, not above the intact slot's %d", l.Token(), tokens[0])
	}
}

func TestDeletedLockFileIsLost(t *testing.T) {
	dir := t.TempDir()
	b, _ := Open(dir)
	l, err := b.Acquire(t.Context(), "k", opts("r"))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "k.lock")) // someone cleans /var/lock by hand
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Renew after the lock file was deleted = %v, want ErrLost", err)
	}
	l.Release(t.Context())
}

func TestInspectNeverMakesALockLookBusy(t *testing.T) {
	b, _ := Open(t.TempDir())
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				b.Inspect(context.Background(), "k")
			}
		}
	}()
	for i := range 300 {
		l, err := b.Acquire(t.Context(), "k", opts("r"))
		if err != nil {
			t.Fatalf("acquire %d of a free lock while inspecting: %v", i, err)
		}
		l.Release(t.Context())
	}
	close(stop)
	<-done
}

func TestOpenURL(t *testing.T) {
	dir := t.TempDir()
	for raw, want := range map[string]string{"file://" + dir: dir, "file://localhost" + dir: dir, "file:": DefaultDir(), "file://": DefaultDir()} {
		u, _ := url.Parse(raw)
		b, err := OpenURL(u)
		if err != nil || b.Dir() != want {
			t.Errorf("OpenURL(%q) = %v, %v; want dir %s", raw, b, err, want)
		}
	}
	for _, raw := range []string{"file://otherhost/x", "file:relative"} {
		u, _ := url.Parse(raw)
		if _, err := OpenURL(u); !errors.Is(err, backend.ErrInvalidURL) {
			t.Errorf("OpenURL(%q) = %v, want ErrInvalidURL", raw, err)
		}
	}
}

// nobody owns what an unprivileged local user could plant.
const nobody = 65534

// A waiter blocked on a lock file that is then deleted, and re-created by
// a newcomer, must not be granted the deleted file's lock while the
// newcomer holds the new one: it locks what the path names now.
func TestWaiterOnADeletedLockFileLocksTheNewOne(t *testing.T) {
	dir := t.TempDir()
	b, _ := Open(dir)
	old := backendtest.MustAcquire(t, b, "k", opts("old"))
	waited := make(chan backend.Lease, 1)
	go func() {
		o := opts("waiter")
		o.Wait = true
		l, err := b.Acquire(t.Context(), "k", o)
		if err != nil {
			t.Error(err)
		}
		waited <- l
	}()
	time.Sleep(50 * time.Millisecond) // the waiter blocks on the old file
	if err := os.Remove(filepath.Join(dir, "k.lock")); err != nil {
		t.Fatal(err)
	}
	newcomer := backendtest.MustAcquire(t, b, "k", opts("newcomer"))
	old.Release(t.Context())
	select {
	case <-waited:
		t.Fatal("the waiter was granted the deleted file's lock while the newcomer held the lock")
	case <-time.After(200 * time.Millisecond):
	}
	if err := newcomer.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if l := <-waited; l == nil || l.Token() <= newcomer.Token() {
		t.Errorf("waiter's lease %v after the newcomer's token %d", l, newcomer.Token())
	}
}

// Inspect reads a lock file without the lock: a FIFO planted in its place
// in a shared directory must be refused, not hang the reader.
func TestPlantedFIFOIsRefusedAtOnce(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "k.lock"), 0o666); err != nil {
		t.Fatal(err)
	}
	b, _ := Open(dir)
	done := make(chan error, 1)
	go func() { _, err := b.Inspect(context.Background(), "k"); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, backend.ErrPermission) {
			t.Errorf("Inspect of a FIFO = %v, want ErrPermission", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Inspect of a FIFO hangs")
	}
}

func TestPlantedLinksAreNeverFollowed(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(victim, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Symlink(victim, filepath.Join(dir, "sym.lock"))
	os.Link(victim, filepath.Join(dir, "hard.lock"))
	b, _ := Open(dir)
	for _, key := range []string{"sym", "hard"} {
		if _, err := b.Acquire(t.Context(), key, opts("r")); !errors.Is(err, backend.ErrPermission) {
			t.Errorf("Acquire through a planted %s link = %v, want ErrPermission", key, err)
		}
		if err := b.ForceRelease(t.Context(), key); !errors.Is(err, backend.ErrPermission) {
			t.Errorf("ForceRelease through a planted %s link = %v, want ErrPermission", key, err)
		}
	}
	fi, _ := os.Stat(victim)
	content, _ := os.ReadFile(victim)
	if fi.Mode().Perm() != 0o600 || string(content) != "root:secret\n" {
		t.Errorf("the link's target was changed: mode %v, content %q", fi.Mode(), content)
	}
}

func TestInspectCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	b, _ := Open(dir)
	if st, err := b.Inspect(t.Context(), "never"); err != nil || st.Held || st.Token != 0 {
		t.Errorf("Inspect of a new key = %+v, %v", st, err)
	}
	if err := b.ForceRelease(t.Context(), "never"); err != nil {
		t.Errorf("ForceRelease of a new key: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("status and release created %v", entries)
	}
}

func TestSemaphores(t *testing.T) {
	dir := t.TempDir()
	backendtest.RunSemaphores(t, backendtest.Operators{
		Harness: backendtest.Harness{
			Open: func(t *testing.T) backend.Backend {
				b, err := Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			Crash: func(t *testing.T, l backend.Lease) { l.(*lease).abandon() },
			TTL:   time.Second,
		},
		RenewedResolution: 10 * time.Millisecond,
	})
}
