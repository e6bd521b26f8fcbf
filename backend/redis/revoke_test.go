package redis

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// A revoke racing the holder's release: whichever runs first, the key
// ends up free, and exactly one of the two reports ErrLost (a revoke that
// came after the release finds no holder; a release that came after the
// revoke frees the lock and says it was revoked).
func TestRevokeRacesRelease(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv.URL())
	for i := range 50 {
		for _, limit := range []int{1, 2} {
			o := semOpts("h", limit, time.Minute)
			l := backendtest.MustAcquire(t, b, "k", o)
			var revErr, relErr error
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); revErr = b.Revoke(t.Context(), "k", l.Token()) }()
			go func() { defer wg.Done(); relErr = l.Release(t.Context()) }()
			wg.Wait()
			if errors.Is(revErr, backend.ErrLost) == errors.Is(relErr, backend.ErrLost) {
				t.Fatalf("round %d, limit %d: Revoke = %v, Release = %v; want exactly one ErrLost", i, limit, revErr, relErr)
			}
			if revErr != nil && !errors.Is(revErr, backend.ErrLost) || relErr != nil && !errors.Is(relErr, backend.ErrLost) {
				t.Fatalf("round %d: Revoke = %v, Release = %v", i, revErr, relErr)
			}
			next, err := b.Acquire(t.Context(), "k", semOpts("next", limit, time.Minute))
			if err != nil {
				t.Fatalf("round %d, limit %d: the key is not free after the race: %v", i, limit, err)
			}
			if err := next.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A revoke racing the holder's renewal: the renewal may win, but once the
// revoke has answered, no renewal succeeds and the lock stays taken.
func TestRevokeRacesRenew(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv.URL())
	for i := range 50 {
		for _, limit := range []int{1, 2} {
			l := backendtest.MustAcquire(t, b, "k", semOpts("h", limit, time.Minute))
			var revErr error
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); revErr = b.Revoke(t.Context(), "k", 0) }()
			go func() { defer wg.Done(); _ = l.Renew(t.Context()) }()
			wg.Wait()
			if revErr != nil {
				t.Fatalf("round %d: Revoke: %v", i, revErr)
			}
			if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
				t.Fatalf("round %d, limit %d: Renew after the revoke answered = %v, want ErrLost", i, limit, err)
			}
			if _, err := b.Acquire(t.Context(), "k", semOpts("other", 1, time.Minute)); err == nil {
				t.Fatalf("round %d, limit %d: a revoked holder's key was granted to another", i, limit)
			}
			if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
				t.Fatalf("round %d: the revoked holder's Release = %v, want ErrLost", i, err)
			}
		}
	}
}

// A revoked holder whose server restarts with its data (AOF) is still
// revoked: it cannot renew, others find the key taken, its release frees
// it. Without persistence the restart loses the lock, and the next grant's
// token is still higher.
func TestRevokedHolderAcrossRestart(t *testing.T) {
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	b := open(t, srv.URL())
	for _, limit := range []int{1, 2} {
		held := fillSem(t, b, "k", limit, limit, time.Minute) // full: the revoked slot is the one that counts
		l := held[0]
		if err := b.Revoke(t.Context(), "k", l.Token()); err != nil {
			t.Fatal(err)
		}
		srv.Restart()
		st, err := b.Inspect(t.Context(), "k")
		if err != nil || !st.Held || !st.Revoked || st.Token != l.Token() {
			// st repeats the oldest holder, the revoked one
			t.Fatalf("limit %d: Inspect after a restart = %+v, %v; want held by the revoked holder", limit, st, err)
		}
		if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Errorf("limit %d: Renew after a restart = %v, want ErrLost", limit, err)
		}
		if _, err := b.Acquire(t.Context(), "k", semOpts("other", limit, time.Minute)); !errors.Is(err, backend.ErrHeld) {
			t.Errorf("limit %d: Acquire after a restart = %v, want ErrHeld", limit, err)
		}
		if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Errorf("limit %d: Release = %v, want ErrLost", limit, err)
		}
		next := backendtest.MustAcquire(t, b, "k", semOpts("other", limit, time.Minute))
		if next.Token() <= l.Token() {
			t.Errorf("token %d after %d", next.Token(), l.Token())
		}
		for _, h := range append(held[1:], next) {
			if err := h.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A lock whose holder kept no record (a lockrun older than the record)
// can be revoked: the revoke starts a record of that grant, which ends
// with the lock.
func TestRevokeOfALockWithoutRecord(t *testing.T) {
	srv := redistest.Start(t)
	b, c := open(t, srv.URL()), srv.Client(t)
	l := backendtest.MustAcquire(t, b, "k", opts("h", time.Minute))
	n := b.names("k")
	if err := c.Del(t.Context(), n.meta).Err(); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Inspect(t.Context(), "k"); err != nil || st.Revoked {
		t.Fatalf("Inspect of a lock without record = %+v, %v; want not revoked", st, err)
	}
	if err := b.Revoke(t.Context(), "k", 0); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Inspect(t.Context(), "k"); err != nil || !st.Held || !st.Revoked {
		t.Errorf("Inspect after Revoke = %+v, %v; want held, revoked", st, err)
	}
	if pttl := c.PTTL(t.Context(), n.meta).Val(); pttl <= 0 || pttl > time.Minute {
		t.Errorf("the revoke's record lasts %v, want the lock's time left", pttl)
	}
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Renew = %v, want ErrLost", err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Release = %v, want ErrLost", err)
	}
	if c.Exists(t.Context(), n.lock, n.meta).Val() != 0 {
		t.Error("the revoked holder's release left its lock or record behind")
	}
}
