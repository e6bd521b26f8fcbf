package etcd

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/backend/backendtest"
	"github.com/lockrun/lockrun/backend/etcd/etcdtest"
)

// openTest opens a backend on srv, closed when the test ends.
func openTest(t testing.TB, rawURL string) *Backend {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenURL(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	srv := etcdtest.Start(t)
	backendtest.Run(t, backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return openTest(t, srv.URL()) },
		// A crashed holder just stops renewing; its lease expires.
		TTL: time.Second,
	})
}

// mustAcquire takes key with o on b, failing the test otherwise.
func mustAcquire(t testing.TB, b *Backend, key string, o backend.AcquireOptions) backend.Lease {
	t.Helper()
	l, err := b.Acquire(t.Context(), key, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// roundTrip takes key on b, renews and releases it, failing the test on
// any error.
func roundTrip(t testing.TB, b *Backend, key string) {
	t.Helper()
	l := mustAcquire(t, b, key, opts("a", false))
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
