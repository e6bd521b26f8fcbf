package etcd

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

// openTest opens a backend on rawURL, closed when the test ends.
func openTest(t testing.TB, rawURL string) *Backend {
	t.Helper()
	return backendtest.OpenURL(t, rawURL, OpenURL)
}

func TestConformance(t *testing.T) {
	srv := etcdtest.Start(t)
	backendtest.Run(t, backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return openTest(t, srv.URL()) },
		// A crashed holder just stops renewing; its lease expires.
		TTL: time.Second,
	})
}

// roundTrip takes key on b, renews and releases it, failing the test on
// any error.
func roundTrip(t testing.TB, b *Backend, key string) {
	t.Helper()
	l := backendtest.MustAcquire(t, b, key, opts("a", false))
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestOperators(t *testing.T) {
	srv := etcdtest.Start(t)
	backendtest.RunOperators(t, backendtest.Operators{
		Harness: backendtest.Harness{
			Open: func(t *testing.T) backend.Backend { return openTest(t, srv.URL()) },
			TTL:  time.Second,
		},
		RenewedResolution: time.Second,
		ExpiryResolution:  time.Second,
	})
}
