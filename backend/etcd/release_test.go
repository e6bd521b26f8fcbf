package etcd

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

// A release deletes the entry first, to wake the next in line at once
// (see TestRequestsPerOperation), and revokes the lease after it, in the
// background: by Close no lease is left behind to expire.
func TestReleaseRevokesTheLease(t *testing.T) {
	srv := etcdtest.Start(t)
	b, err := backendtest.TryOpenURL(srv.URL(), OpenURL)
	if err != nil {
		t.Fatal(err)
	}
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
