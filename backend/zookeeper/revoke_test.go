package zookeeper

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/zktest"
)

// wantFree checks that key can be taken at once.
func wantFree(t *testing.T, b *Backend, key string) {
	t.Helper()
	l, err := b.Acquire(t.Context(), key, opts("next", false))
	if err != nil {
		t.Fatalf("Acquire after the revoked holder released: %v", err)
	}
	_ = l.Release(t.Context())
}

// TestRevokeRacingRenew: a Revoke that returns nil while the holder renews
// as fast as it can is seen by the holder's next renewal, whichever of the
// two writes reached the node first.
func TestRevokeRacingRenew(t *testing.T) {
	srv := zktest.Start(t)
	b, admin := openTest(t, srv.URL()), openTest(t, srv.URL())
	for i := range 10 {
		key := backendtest.Key(t) + string(rune('a'+i))
		l := backendtest.MustAcquire(t, b, key, opts("alice", false))
		token := l.Token() // read before the renewals start
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := l.Renew(t.Context()); err != nil {
					return
				}
			}
		}()
		time.Sleep(time.Duration(i) * time.Millisecond)
		if err := admin.Revoke(t.Context(), key, token); err != nil {
			t.Fatalf("Revoke racing a renewal: %v", err)
		}
		close(stop)
		<-done
		if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Fatalf("Renew after a Revoke that raced renewals = %v, want ErrLost", err)
		}
		if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Errorf("the revoked holder's Release = %v, want ErrLost", err)
		}
		wantFree(t, b, key)
	}
}

// TestRevokeRacingRelease: a Revoke and the holder's Release at once leave
// the key free, and each reports one of its two outcomes.
func TestRevokeRacingRelease(t *testing.T) {
	srv := zktest.Start(t)
	b, admin := openTest(t, srv.URL()), openTest(t, srv.URL())
	for i := range 10 {
		key := backendtest.Key(t) + string(rune('a'+i))
		o := opts("alice", false)
		o.MinHold = time.Minute // a revoked release skips it; a plain one keeps it
		l := backendtest.MustAcquire(t, b, key, o)
		var wg sync.WaitGroup
		var relErr, revErr error
		wg.Add(2)
		go func() { defer wg.Done(); relErr = l.Release(t.Context()) }()
		go func() { defer wg.Done(); revErr = admin.Revoke(t.Context(), key, l.Token()) }()
		wg.Wait()
		if revErr != nil && !errors.Is(revErr, backend.ErrLost) {
			t.Fatalf("Revoke racing a release: %v", revErr)
		}
		switch {
		case errors.Is(relErr, backend.ErrLost): // revoked first: freed, no min-hold
			wantFree(t, b, key)
		case relErr != nil:
			t.Fatalf("Release racing a Revoke: %v", relErr)
		default: // released first: the min-hold keeps the key, Revoke ends it
			if revErr != nil {
				t.Fatalf("Revoke of a min-hold: %v", revErr)
			}
			wantFree(t, b, key)
		}
	}
}

// TestRevokedHolderOutlivesAServerRestart: the mark is in the node's data,
// which the server keeps with the session across a restart.
func TestRevokedHolderOutlivesAServerRestart(t *testing.T) {
	srv := zktest.Start(t)
	key := backendtest.Key(t)
	b := openTest(t, srv.URL())
	o := opts("alice", false)
	o.TTL = 5 * time.Second // outlives the restart and the client's redial
	l := backendtest.MustAcquire(t, b, key, o)
	if err := openTest(t, srv.URL()).Revoke(t.Context(), key, 0); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	other := openTest(t, srv.URL())
	st, err := other.Inspect(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || st.Token != l.Token() || !st.Revoked {
		t.Fatalf("Inspect after the restart = %+v, want token %d held and revoked", st, l.Token())
	}
	if _, err := other.Acquire(t.Context(), key, opts("bob", false)); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("Acquire of a revoked lock after a restart = %v, want ErrHeld", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Second)
	defer cancel()
	for err := l.Renew(ctx); !errors.Is(err, backend.ErrLost); err = l.Renew(ctx) {
		if ctx.Err() != nil || err == nil {
			t.Fatalf("the revoked holder's Renew after the restart = %v, want ErrLost", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("the revoked holder's Release = %v, want ErrLost", err)
	}
	wantFree(t, other, key)
}

// TestRevokeOfEverySlotAndAMinHold: Revoke(key, 0) marks every holder of a
// semaphore, whose min-hold releases are skipped, and ends the hold of a
// slot already released (no command runs there) in the same multi.
func TestRevokeOfEverySlotAndAMinHold(t *testing.T) {
	srv := zktest.Start(t)
	key := backendtest.Key(t)
	b := openTest(t, srv.URL())
	var held []backend.Lease
	for _, h := range []string{"kept", "a", "b"} {
		o := semOpts(h, 3, false)
		o.MinHold = time.Minute
		held = append(held, backendtest.MustAcquire(t, openTest(t, srv.URL()), key, o))
	}
	if err := held[0].Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Revoke(t.Context(), key, 0); err != nil {
		t.Fatal(err)
	}
	st, err := b.Inspect(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Holders) != 2 || !st.Holders[0].Revoked || !st.Holders[1].Revoked {
		t.Fatalf("Inspect after Revoke(0) = %+v, want the two live holders, revoked, and no min-hold", st.Holders)
	}
	for _, l := range held[1:] {
		if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Errorf("Renew of a revoked slot = %v, want ErrLost", err)
		}
		if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Errorf("Release of a revoked slot = %v, want ErrLost", err)
		}
	}
	if st, err := b.Inspect(t.Context(), key); err != nil || st.Held {
		t.Fatalf("Inspect after the revoked slots released = %+v, %v: want free, their min-holds skipped", st, err)
	}
}

// TestRevokedLeaseNotRenewedDropsItsNode: the client library's pings keep
// a session alive as long as its process, so a revoked lease that is not
// renewed (nor released) deletes its own node at its deadline; one that
// was not revoked keeps it, as before.
func TestRevokedLeaseNotRenewedDropsItsNode(t *testing.T) {
	srv := zktest.Start(t)
	b := openTest(t, srv.URL())
	keep, drop := backendtest.Key(t)+"k", backendtest.Key(t)+"d"
	kept := backendtest.MustAcquire(t, b, keep, opts("kept", false))
	revoked := backendtest.MustAcquire(t, b, drop, opts("revoked", false))
	if err := b.Revoke(t.Context(), drop, revoked.Token()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(revoked.Start().Add(revoked.TTL())) + time.Second)
	if st, err := b.Inspect(t.Context(), drop); err != nil || st.Held {
		t.Errorf("a revoked lease past its deadline: Inspect = %+v, %v; want free", st, err)
	}
	if st, err := b.Inspect(t.Context(), keep); err != nil || !st.Held {
		t.Errorf("a lease past its deadline, not revoked: Inspect = %+v, %v; want still held", st, err)
	}
	if err := revoked.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Release of a dropped lease = %v, want ErrLost", err)
	}
	if err := kept.Release(t.Context()); err != nil {
		t.Errorf("Release of the kept lease: %v", err)
	}
}

// TestOlderNodesReadAsNotRevoked: a node an older lockrun wrote has no
// mark.
func TestOlderNodesReadAsNotRevoked(t *testing.T) {
	old := contenderStatus("k", "n", []byte(`{"holder":"h","run_id":"r","info":{},"token":7,"since_us":1}`))
	if !old.Held || old.Token != 7 || old.Revoked {
		t.Errorf("an older node reads as %+v, want held by token 7, not revoked", old)
	}
	if st := contenderStatus("k", "n", []byte(`{"run_id":"r","token":7,"revoked":true}`)); !st.Revoked {
		t.Errorf("a revoked node reads as %+v", st)
	}
}

// TestWaiterBehindARevokedHolder: a revoke marks the holder's node, which
// fires the watch of the waiter behind it; the waiter sleeps on while the
// revoked holder still holds, and takes the lock once the node is gone.
func TestWaiterBehindARevokedHolder(t *testing.T) {
	srv := zktest.Start(t)
	b, other, key := openTest(t, srv.URL()), openTest(t, srv.URL()), backendtest.Key(t)
	o := opts("alice", false)
	o.TTL = 3 * time.Second // its node outlives the test's waits
	alice := backendtest.MustAcquire(t, b, key, o)
	got := make(chan backend.Lease, 1)
	go func() {
		l, err := other.Acquire(t.Context(), key, opts("bob", true))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(300 * time.Millisecond) // bob queued and watching
	if err := b.Revoke(t.Context(), key, alice.Token()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
		t.Fatal("bob took the lock while the revoked alice still held it")
	case <-time.After(300 * time.Millisecond):
	}
	_ = alice.Release(t.Context()) // revoked: reports the loss, deletes the node
	select {
	case l := <-got:
		if l != nil {
			if err := l.Release(t.Context()); err != nil {
				t.Error(err)
			}
		}
	case <-time.After(5 * time.Second):
		t.Fatal("bob did not take the lock within 5 s of alice's release")
	}
}
