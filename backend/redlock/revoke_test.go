package redlock

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

func revokeOpts(holder string, limit int) backend.AcquireOptions {
	return backend.AcquireOptions{TTL: time.Minute, Holder: holder, RunID: "run-" + holder, Limit: limit}
}

// A revoke racing the holder's release: whichever runs first, the key
// ends up free, and exactly one of the two reports ErrLost.
func TestRevokeRacesRelease(t *testing.T) {
	b := open(t, urlOf(masters(t, 3)))
	for i := range 30 {
		for _, limit := range []int{1, 2} {
			l := backendtest.MustAcquire(t, b, "k", revokeOpts("h", limit))
			var revErr, relErr error
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); revErr = b.Revoke(t.Context(), "k", l.Token()) }()
			go func() { defer wg.Done(); relErr = l.Release(t.Context()) }()
			wg.Wait()
			for _, err := range []error{revErr, relErr} {
				if err != nil && !errors.Is(err, backend.ErrLost) {
					t.Fatalf("round %d: Revoke = %v, Release = %v", i, revErr, relErr)
				}
			}
			// Per master the two are ordered; across masters they may
			// interleave, so both may report success, never both a loss.
			if revErr != nil && relErr != nil {
				t.Fatalf("round %d, limit %d: Revoke = %v, Release = %v; both lost", i, limit, revErr, relErr)
			}
			next, err := b.Acquire(t.Context(), "k", revokeOpts("next", limit))
			if err != nil {
				t.Fatalf("round %d, limit %d: the key is not free after the race: %v", i, limit, err)
			}
			if err := next.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A revoke with a minority of the masters down still stops the holder:
// its renewal fails on a majority, the key stays taken, its release frees
// it. With a majority down the revoke fails as unavailable.
func TestRevokeWithMastersDown(t *testing.T) {
	for _, limit := range []int{1, 2} {
		t.Run(fmt.Sprint("limit-", limit), func(t *testing.T) {
			srv := masters(t, 3)
			b := open(t, urlOf(srv))
			l := backendtest.MustAcquire(t, b, "k", revokeOpts("h", limit))
			srv[0].Freeze()
			srv[1].Freeze()
			if err := b.Revoke(t.Context(), "k", 0); !errors.Is(err, backend.ErrUnavailable) {
				t.Errorf("Revoke with 2 of 3 masters frozen = %v, want ErrUnavailable", err)
			}
			srv[1].Thaw()
			if err := b.Revoke(t.Context(), "k", l.Token()); err != nil {
				t.Fatalf("Revoke with 1 of 3 masters frozen: %v", err)
			}
			srv[0].Thaw() // the holder's copy there is not marked
			if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
				t.Errorf("Renew after a revoke on a majority = %v, want ErrLost", err)
			}
			st, err := b.Inspect(t.Context(), "k")
			if err != nil || !st.Held || !st.Revoked {
				t.Errorf("Inspect = %+v, %v; want held, revoked", st, err)
			}
			if _, err := b.Acquire(t.Context(), "k", revokeOpts("other", 1)); err == nil {
				t.Error("a revoked holder's key was granted to another")
			}
			if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
				t.Errorf("the revoked holder's Release = %v, want ErrLost", err)
			}
			next := backendtest.MustAcquire(t, b, "k", revokeOpts("other", 1))
			if next.Token() <= l.Token() {
				t.Errorf("token %d after %d", next.Token(), l.Token())
			}
			if err := next.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A revoked holder one of whose masters restarts empty: the holder still
// cannot renew on a majority, the others' copies keep the key taken, and
// its release frees it with a higher token next.
func TestRevokedHolderAcrossRestart(t *testing.T) {
	srv := masters(t, 3)
	b := open(t, urlOf(srv))
	l := backendtest.MustAcquire(t, b, "k", revokeOpts("h", 1))
	if err := b.Revoke(t.Context(), "k", 0); err != nil {
		t.Fatal(err)
	}
	srv[2].Restart()
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Renew after a master's restart = %v, want ErrLost", err)
	}
	if _, err := b.Acquire(t.Context(), "k", revokeOpts("other", 1)); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("Acquire after a master's restart = %v, want ErrHeld", err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Release = %v, want ErrLost", err)
	}
	next := backendtest.MustAcquire(t, b, "k", revokeOpts("other", 1))
	if next.Token() <= l.Token() {
		t.Errorf("token %d after %d", next.Token(), l.Token())
	}
	if err := next.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
