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
	"github.com/lockrun/lockrun/backend/backendtest"
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

func TestSharedDirectoryFilesAreWritableByAll(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	b, _ := Open(dir)
	l, err := b.Acquire(t.Context(), "k", opts("r"))
	if err != nil {
		t.Fatal(err)
	}
	l.Release(t.Context())
	fi, err := os.Stat(filepath.Join(dir, "k.lock"))
	if err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("lock file mode %v, %v; want 0666 so other users can lock it", fi.Mode(), err)
	}
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
