package file

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// A release tells the backend whether someone waits for the key, a plain
// lock's waiter or a semaphore's, so that Close lingers (see closeDelay)
// only when the lock was handed on: a run that hands it on keeps its exit
// out of the next holder's start, and one that does not exits at once.
func TestReleaseTellsWhetherSomeoneWaits(t *testing.T) {
	for _, limit := range []int{1, 2} {
		for _, waiter := range []bool{false, true} {
			dir := t.TempDir()
			b, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			o := opts("holder")
			if limit > 1 {
				o = semOpts("holder", limit)
			}
			var held []backend.Lease
			for i := range limit {
				o.RunID = "holder" + string(rune('a'+i))
				l, err := b.Acquire(t.Context(), "k", o)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, l)
			}
			got := make(chan backend.Lease, 1)
			if waiter {
				w, err := Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				wo := o
				wo.RunID, wo.Wait = "waiter", true
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					l, err := w.Acquire(ctx, "k", wo)
					if err != nil {
						t.Errorf("waiter: %v", err)
					}
					got <- l
				}()
				time.Sleep(300 * time.Millisecond) // in its wait
			}
			if err := held[0].Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			if b.handedOn.Load() != waiter {
				t.Errorf("limit %d, someone waiting %v: the release says %v", limit, waiter, b.handedOn.Load())
			}
			if waiter {
				if l := <-got; l != nil {
					_ = l.Release(t.Context())
				}
			}
			for _, l := range held[1:] {
				_ = l.Release(t.Context())
			}
		}
	}
}

// Granting is called once the lock is taken and before the grant's record
// is written (the caller starts the watchdog beside that write), and never
// on a busy answer: a held flock, a minimum hold still running, a file
// that is not lockrun's.
func TestGrantingComesBeforeTheRecord(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	var seen backend.Token
	o := opts("second")
	o.Granting = func() {
		calls++
		st, err := b.Inspect(context.Background(), "k")
		if err != nil {
			t.Error(err)
		}
		seen = st.Token
	}
	busy := func(why string, wantErr error) {
		t.Helper()
		if _, err := b.Acquire(t.Context(), "k", o); !errors.Is(err, wantErr) || calls != 0 {
			t.Fatalf("%s: %v, Granting called %d times; want %v, none", why, err, calls, wantErr)
		}
	}
	held := opts("first")
	held.MinHold = time.Hour
	first, err := b.Acquire(t.Context(), "k", held)
	if err != nil {
		t.Fatal(err)
	}
	busy("flock held", backend.ErrHeld)
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	busy("minimum hold running", backend.ErrHeld)
	if err := b.ReleaseHolder(t.Context(), "k", first.Token()); err != nil {
		t.Fatal(err)
	}
	second, err := b.Acquire(t.Context(), "k", o)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || seen != first.Token() || second.Token() <= seen {
		t.Fatalf("Granting called %d times, saw token %v (the first's %v, the grant's %v); want once, before the grant was written",
			calls, seen, first.Token(), second.Token())
	}
	if err := os.WriteFile(filepath.Join(dir, "other.lock"), []byte("not ours\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls = 0
	if _, err := b.Acquire(t.Context(), "other", o); !errors.Is(err, backend.ErrPermission) || calls != 0 {
		t.Fatalf("foreign file: %v, Granting called %d times; want ErrPermission, none", err, calls)
	}
}
