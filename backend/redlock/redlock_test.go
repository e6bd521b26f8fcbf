package redlock

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// masters starts n private redis-servers.
func masters(t testing.TB, n int, extra ...string) []*redistest.Server {
	t.Helper()
	s := make([]*redistest.Server, n)
	for i := range s {
		s[i] = redistest.Start(t, extra...)
	}
	return s
}

// urlOf is the redlock URL of the servers, with the restart wait turned
// off: servers that have just started would otherwise grant no lock for a
// TTL (restart.go). Tests of that wait build their own URL.
func urlOf(servers []*redistest.Server) string {
	return "redlock://" + hostsOf(servers) + "/0?" + redistest.NoRestartWait
}

// hostsOf is the servers' host:port list, comma-separated.
func hostsOf(servers []*redistest.Server) string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return strings.Join(addrs, ",")
}

// open returns a backend on rawURL, closed when the test ends.
func open(t testing.TB, rawURL string) *Backend {
	t.Helper()
	return backendtest.OpenURL(t, rawURL, OpenURL)
}

// tryOpen opens rawURL; the caller closes the backend.
func tryOpen(rawURL string) (*Backend, error) {
	return backendtest.TryOpenURL(rawURL, OpenURL)
}

func opts(holder string, ttl time.Duration) backend.AcquireOptions {
	return backend.AcquireOptions{TTL: ttl, Holder: holder, RunID: "run-" + holder}
}

func TestConformance(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d-masters", n), func(t *testing.T) {
			raw := urlOf(masters(t, n))
			backendtest.Run(t, backendtest.Harness{
				Open: func(t *testing.T) backend.Backend { return open(t, raw) },
				TTL:  time.Second,
			})
		})
	}
}

func TestOperators(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d-masters", n), func(t *testing.T) {
			raw := urlOf(masters(t, n))
			backendtest.RunOperators(t, backendtest.Operators{Harness: backendtest.Harness{
				Open: func(t *testing.T) backend.Backend { return open(t, raw) },
				TTL:  time.Second,
			}})
		})
	}
}

func TestSemaphores(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d-masters", n), func(t *testing.T) {
			raw := urlOf(masters(t, n))
			backendtest.RunSemaphores(t, backendtest.Operators{Harness: backendtest.Harness{
				Open: func(t *testing.T) backend.Backend { return open(t, raw) },
				TTL:  time.Second,
			}})
		})
	}
}

func TestRevoke(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d-masters", n), func(t *testing.T) {
			raw := urlOf(masters(t, n))
			backendtest.RunRevoke(t, backendtest.Operators{Harness: backendtest.Harness{
				Open: func(t *testing.T) backend.Backend { return open(t, raw) },
				TTL:  time.Second,
			}})
		})
	}
}
