package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

// A release deletes the entry first, to wake the next in line at once
// (see TestRequestsPerOperation), and revokes the lease after it, in the
// background: by Close no released lease is left behind to expire.
func TestReleaseRevokesTheLease(t *testing.T) {
	srv := etcdtest.Start(t)
	b := openClosable(t, srv.URL())
	key := backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("a", false))
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ttl, err := srv.Client(t).TimeToLive(t.Context(), l.(*lease).e.id)
	if err != nil || ttl.TTL != -1 {
		t.Errorf("the lease after Release: TTL %v, %v; want -1 (revoked)", ttl.TTL, err)
	}
	if resp, err := srv.Client(t).Get(t.Context(), b.queuePrefix(key), clientv3.WithPrefix()); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("queue after Release: %v, %v; want empty", resp, err)
	}
}

// A release whose key has a waiter holds its revoke back for revokeDelay,
// so that the revoke's write does not reach etcd with the next in line's
// read; Close waits for it. Without a waiter the revoke goes at once.
func TestReleaseHoldsTheRevokeBackForAWaiter(t *testing.T) {
	srv := etcdtest.Start(t)
	old := revokeDelay
	revokeDelay = 2 * time.Second
	t.Cleanup(func() { revokeDelay = old })
	for _, waiter := range []bool{false, true} {
		b := openClosable(t, srv.URL())
		key := backendtest.Key(t) + map[bool]string{false: "-alone", true: "-waited"}[waiter]
		l := backendtest.MustAcquire(t, b, key, opts("a", false))
		got := make(chan backend.Lease, 1)
		if waiter {
			w := openTest(t, srv.URL())
			go func() {
				wl, err := w.Acquire(t.Context(), key, opts("w", true))
				if err != nil {
					t.Errorf("waiter: %v", err)
				}
				got <- wl
			}()
			for n, end := int64(0), time.Now().Add(5*time.Second); n < 2; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatal("the waiter did not queue")
				}
				resp, err := srv.Client(t).Get(t.Context(), b.queuePrefix(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatal(err)
				}
				n = resp.Count
			}
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		ttl, err := srv.Client(t).TimeToLive(t.Context(), l.(*lease).e.id)
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		closed := time.Since(begin)
		switch {
		case waiter && (ttl.TTL < 0 || closed < time.Second):
			t.Errorf("with a waiter: the lease's TTL right after Release %d s, Close took %v; want it alive, and Close to wait for the revoke", ttl.TTL, closed)
		case !waiter && closed > time.Second:
			t.Errorf("without a waiter Close took %v; want the revoke sent at once", closed)
		}
		if ttl, err := srv.Client(t).TimeToLive(t.Context(), l.(*lease).e.id); err != nil || ttl.TTL != -1 {
			t.Errorf("the lease after Close: TTL %v, %v; want -1 (revoked)", ttl.TTL, err)
		}
		if waiter {
			if wl := <-got; wl != nil {
				_ = wl.Release(t.Context())
			}
		}
	}
}

// Releases may run while the backend is closed (a library's shutdown):
// their background revokes must not race with Close's wait for them, and
// a release that Close overtakes fails at once, not at its deadline.
func TestReleaseDuringCloseIsSafe(t *testing.T) {
	srv := etcdtest.Start(t)
	for i := range 6 {
		b := openClosable(t, srv.URL())
		key := backendtest.Key(t)
		var leases []backend.Lease
		for i := range 3 {
			leases = append(leases, backendtest.MustAcquire(t, b, key+string(rune('a'+i)), opts("a", false)))
		}
		done := make(chan struct{})
		for _, l := range leases {
			go func() {
				defer func() { done <- struct{}{} }()
				began := time.Now()
				_ = l.Release(t.Context()) // may fail on the closed client
				if took := time.Since(began); took > time.Second {
					t.Errorf("a release beside Close took %v", took)
				}
			}()
		}
		time.Sleep(time.Duration(1+i%3) * time.Millisecond) // some releases done, some not
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		for range leases {
			<-done
		}
	}
}

// A release whose server stops answering right after the delete must not
// hold Close (a run's exit) past the release's own deadline: the
// background revoke keeps it.
func TestCloseWaitsNoLongerThanTheRelease(t *testing.T) {
	srv := etcdtest.Start(t)
	b := openClosable(t, srv.URL())
	key := backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("a", false))
	w := openTest(t, srv.URL())
	go func() { _, _ = w.Acquire(t.Context(), key, opts("w", true)) }() // so the revoke waits revokeDelay
	waitQueued(t, srv.Client(t), key, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	defer srv.Thaw()
	begin := time.Now()
	_ = b.Close()
	if took := time.Since(begin); took > time.Second {
		t.Errorf("Close took %v with the server frozen; want at most the release's 300ms deadline", took)
	}
}

// openClosable opens a backend that the test closes itself (openTest's
// closes at the test's end).
func openClosable(t *testing.T, rawURL string) *Backend {
	t.Helper()
	b, err := backendtest.TryOpenURL(rawURL, OpenURL)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
