package etcd

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

func TestRevoke(t *testing.T) {
	srv := etcdtest.Start(t)
	backendtest.RunRevoke(t, backendtest.Operators{
		Harness: backendtest.Harness{
			Open: func(t *testing.T) backend.Backend { return openTest(t, srv.URL()) },
			TTL:  time.Second,
		},
		RenewedResolution: time.Second,
		ExpiryResolution:  time.Second,
	})
}

// markers counts the revocation markers left for key.
func markers(t *testing.T, srv *etcdtest.Server, key string) int64 {
	t.Helper()
	resp, err := srv.Client(t).Get(t.Context(), DefaultPrefix[:len(DefaultPrefix)-1]+".revoked/"+key+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// TestRevokeRacesRenew: whichever of a renewal and a revoke lands first,
// the holder learns of it (that renewal is lost, or the watch it started
// sees the marker), its next renewal is lost, and the lock stays taken
// until the holder releases.
func TestRevokeRacesRenew(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	for i := range 20 {
		l := backendtest.MustAcquire(t, b, key, opts("a", false))
		var wg sync.WaitGroup
		var revokeErr error
		wg.Go(func() { revokeErr = b.Revoke(t.Context(), key, l.Token()) })
		renewErr := l.Renew(t.Context())
		wg.Wait()
		if revokeErr != nil {
			t.Fatalf("round %d: Revoke of a live holder = %v", i, revokeErr)
		}
		if renewErr != nil && !errors.Is(renewErr, backend.ErrLost) {
			t.Fatalf("round %d: Renew beside a Revoke = %v", i, renewErr)
		}
		if renewErr == nil {
			wantDoneThenLost(t, l.(*lease), fmt.Sprintf("round %d's revoke", i))
		} else if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Fatalf("round %d: Renew after a Revoke = %v, want ErrLost", i, err)
		}
		if _, err := b.Acquire(t.Context(), key, opts("b", false)); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("round %d: Acquire of a revoked holder's lock = %v, want ErrHeld", i, err)
		}
		if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Fatalf("round %d: the revoked holder's Release = %v, want ErrLost", i, err)
		}
	}
	b.revoking.Wait() // the last release's revoke takes its marker with it
	if n := markers(t, srv, key); n != 0 {
		t.Errorf("%d revocation markers left after every holder released", n)
	}
}

// TestRevokeRacesRelease: a revoke that meets a release either finds the
// holder gone (ErrLost) or marks it; either way the lock is free once the
// release returns, and no marker is left behind.
func TestRevokeRacesRelease(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	for i := range 20 {
		l := backendtest.MustAcquire(t, b, key, opts("a", false))
		var wg sync.WaitGroup
		var revokeErr error
		wg.Go(func() { revokeErr = b.Revoke(t.Context(), key, l.Token()) })
		releaseErr := l.Release(t.Context())
		wg.Wait()
		if revokeErr != nil && !errors.Is(revokeErr, backend.ErrLost) {
			t.Fatalf("round %d: Revoke beside a Release = %v", i, revokeErr)
		}
		if releaseErr != nil && !errors.Is(releaseErr, backend.ErrLost) {
			t.Fatalf("round %d: Release beside a Revoke = %v", i, releaseErr)
		}
		next := backendtest.MustAcquire(t, b, key, opts("b", false))
		if next.Token() <= l.Token() {
			t.Fatalf("round %d: token %d after %d", i, next.Token(), l.Token())
		}
		if err := next.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	b.revoking.Wait()
	if n := markers(t, srv, key); n != 0 {
		t.Errorf("%d revocation markers left after every holder released", n)
	}
}

// TestRevokedHolderSurvivesARestart: the mark is data, kept across a
// restart of etcd with the lease it is attached to.
func TestRevokedHolderSurvivesARestart(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	o := opts("a", false)
	o.TTL = 3 * time.Second
	l := backendtest.MustAcquire(t, b, key, o)
	if err := b.Revoke(t.Context(), key, 0); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	deadline := time.Now().Add(2 * time.Second)
	err := l.Renew(t.Context())
	for errors.Is(err, backend.ErrUnavailable) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		err = l.Renew(t.Context())
	}
	if !errors.Is(err, backend.ErrLost) {
		t.Fatalf("Renew of a revoked holder after a restart = %v, want ErrLost", err)
	}
	st, err := b.Inspect(t.Context(), key)
	if err != nil || !st.Held || !st.Revoked || st.Token != l.Token() {
		t.Errorf("Inspect after a restart = %+v, %v; want held by %d, revoked", st, err, l.Token())
	}
	if _, err := b.Acquire(t.Context(), key, opts("b", false)); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("Acquire of a revoked holder's lock after a restart = %v, want ErrHeld", err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("the revoked holder's Release = %v, want ErrLost", err)
	}
	backendtest.MustAcquire(t, b, key, opts("b", false)).Release(t.Context())
}

// TestRevokedHolderHasNoMinimumHold: the release of a revoked holder
// whose minimum hold has long to run frees the lock at once, and its
// checkpoint is refused.
func TestRevokedHolderHasNoMinimumHold(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	o := opts("a", false)
	o.MinHold = time.Minute
	l := backendtest.MustAcquire(t, b, key, o)
	if err := b.Revoke(t.Context(), key, l.Token()); err != nil {
		t.Fatal(err)
	}
	if err := b.SetCheckpoint(t.Context(), key, l.Token(), []byte("x")); !errors.Is(err, backend.ErrLost) {
		t.Errorf("a revoked holder's SetCheckpoint = %v, want ErrLost", err)
	}
	// No Renew first: Release itself must find the mark.
	if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("the revoked holder's Release = %v, want ErrLost", err)
	}
	next, err := b.Acquire(t.Context(), key, opts("b", false))
	if err != nil {
		t.Fatalf("Acquire after a revoked holder with a minimum hold released = %v, want the lock at once", err)
	}
	next.Release(t.Context())
}

// TestListShowsRevoked: List reads the marks with the entries.
func TestListShowsRevoked(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("a", false))
	other := backendtest.MustAcquire(t, b, key+"-other", opts("c", false))
	if err := b.Revoke(t.Context(), key, 0); err != nil {
		t.Fatal(err)
	}
	all, err := b.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, st := range all {
		switch st.Key {
		case key:
			seen++
			if !st.Revoked {
				t.Errorf("List shows the revoked %q as not revoked: %+v", key, st)
			}
		case key + "-other":
			seen++
			if st.Revoked {
				t.Errorf("List shows %q, never revoked, as revoked", st.Key)
			}
		}
	}
	if seen != 2 {
		t.Errorf("List = %+v, want both keys", all)
	}
	l.Release(t.Context())
	other.Release(t.Context())
}
