package zookeeper

import (
	"crypto/rand"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/zktest"
)

// openTest opens a backend on rawURL, closed when the test ends.
func openTest(t testing.TB, rawURL string) *Backend {
	t.Helper()
	return backendtest.OpenURL(t, rawURL, OpenURL)
}

// proxied opens backends that each reach srv through a proxy of their own,
// so that a test can cut one client off as a crash would.
type proxied struct {
	srv *zktest.Server
	mu  sync.Mutex
	by  map[*Backend]*netproxy.Proxy
}

func (p *proxied) open(t *testing.T) backend.Backend {
	px := netproxy.Start(t, p.srv.Addr())
	b := openTest(t, zktest.URL(px.Addr()))
	p.mu.Lock()
	p.by[b] = px
	p.mu.Unlock()
	return b
}

// crash cuts the lease's client off as a SIGKILL would: nothing more
// reaches the server, which expires the session after its timeout. The
// dead client's session is marked gone, as the process that had it would
// be; TestExpiredSessionIsLost checks that a live client learns of an
// expiry through the library's reconnect.
func (p *proxied) crash(t *testing.T, l backend.Lease) {
	zl := l.(*lease)
	p.mu.Lock()
	px := p.by[zl.b]
	p.mu.Unlock()
	px.Hold(netproxy.Both)
	zl.s.markGone()
}

func TestConformance(t *testing.T) {
	p := &proxied{srv: zktest.Start(t), by: map[*Backend]*netproxy.Proxy{}}
	backendtest.Run(t, backendtest.Harness{Open: p.open, Crash: p.crash, TTL: time.Second})
}

// opts are acquire options with a fresh run id.
func opts(holder string, wait bool) backend.AcquireOptions {
	return backend.AcquireOptions{TTL: time.Second, Holder: holder, RunID: rand.Text(), Wait: wait}
}

func mustURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestOperators(t *testing.T) {
	srv := zktest.Start(t)
	backendtest.RunOperators(t, operators(srv))
}

// operators are the operator suites' values for srv.
func operators(srv *zktest.Server) backendtest.Operators {
	return backendtest.Operators{Harness: backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return openTest(t, zktest.URL(srv.Addr())) },
		TTL:  time.Second,
	}}
}

func TestRevoke(t *testing.T) {
	backendtest.RunRevoke(t, operators(zktest.Start(t)))
}

// TestSemaphores runs the semaphore suite with the operators' values, on
// clients behind proxies of their own so that a holder can crash.
func TestSemaphores(t *testing.T) {
	p := &proxied{srv: zktest.Start(t), by: map[*Backend]*netproxy.Proxy{}}
	backendtest.RunSemaphores(t, backendtest.Operators{Harness: backendtest.Harness{Open: p.open, Crash: p.crash, TTL: time.Second}})
}
