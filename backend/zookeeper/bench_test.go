package zookeeper

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/zktest"
)

// Benchmarks against a private standalone ZooKeeper on loopback
// (forceSync=no, as zktest runs it): go test -run '^$' -bench . ./backend/zookeeper

func BenchmarkAcquireRelease(b *testing.B) {
	srv := zktest.Start(b)
	backendtest.BenchAcquireRelease(b, openTest(b, srv.URL()), backendtest.Key(nil), opts("a", false))
}

// BenchmarkSemaphoreAcquireRelease is BenchmarkAcquireRelease for one
// holder of a semaphore of limit 3: the same requests.
func BenchmarkSemaphoreAcquireRelease(b *testing.B) {
	srv := zktest.Start(b)
	backendtest.BenchAcquireRelease(b, openTest(b, srv.URL()), backendtest.Key(nil), semOpts("a", 3, false))
}

func BenchmarkRenew(b *testing.B) {
	srv := zktest.Start(b)
	backendtest.BenchRenew(b, openTest(b, srv.URL()), backendtest.Key(nil), opts("a", false))
}

// BenchmarkSession measures opening and closing one session, which every
// Acquire pays for (and Open once more).
func BenchmarkSession(b *testing.B) {
	srv := zktest.Start(b)
	cfg, err := ParseURL(mustURL(b, srv.URL()), func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s, err := connect(b.Context(), cfg, 2*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		s.close()
	}
}

// BenchmarkHandOff measures a plain lock's hand-off: from the holder's
// Release to its queued waiter's grant.
func BenchmarkHandOff(b *testing.B) { benchHandOff(b, 1) }

// BenchmarkSemaphoreHandOff is BenchmarkHandOff for a full semaphore of
// limit 3: one holder releases, the first waiter takes its slot.
func BenchmarkSemaphoreHandOff(b *testing.B) { benchHandOff(b, 3) }

func benchHandOff(b *testing.B, limit int) {
	srv := zktest.Start(b)
	be, key := openTest(b, srv.URL()), backendtest.Key(nil)
	admin, err := be.adminSession(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	var held []backend.Lease
	for range limit {
		held = append(held, backendtest.MustAcquire(b, be, key, semOpts("h", limit, false)))
	}
	var lat []time.Duration
	for b.Loop() {
		got := make(chan backend.Lease, 1)
		go func() {
			l, err := be.Acquire(b.Context(), key, semOpts("w", limit, true))
			if err != nil {
				b.Error(err)
			}
			got <- l
		}()
		for { // until the waiter is queued
			kids, err := contenders(b.Context(), be, admin, key)
			if err != nil {
				b.Fatal(err)
			}
			if len(kids) > limit {
				break
			}
			time.Sleep(time.Millisecond)
		}
		released := time.Now()
		if err := held[0].Release(b.Context()); err != nil {
			b.Fatal(err)
		}
		l := <-got
		if l == nil {
			return
		}
		lat = append(lat, time.Since(released))
		held = append(held[1:], l)
	}
	backendtest.ReportLatencies(b, lat)
	for _, l := range held {
		_ = l.Release(b.Context())
	}
}

// BenchmarkAcquireReleaseRequests counts what one Acquire and Release of
// a plain lock send to the server, through a proxy: requests (chunks
// forwarded upstream; a session's pings fall in rarely, with a TTL of
// 10 s) per acquire and release, the session's connect and close included.
func BenchmarkAcquireReleaseRequests(b *testing.B) { benchRequests(b, 1) }

func benchRequests(b *testing.B, limit int) {
	srv := zktest.Start(b)
	px := netproxy.Start(b, srv.Addr())
	be, key := openTest(b, zktest.URL(px.Addr())), backendtest.Key(nil)
	o := opts("a", false)
	o.TTL, o.Limit = 10*time.Second, limit
	before := px.Traffic(netproxy.Up).Chunks
	for b.Loop() {
		l := backendtest.MustAcquire(b, be, key, o)
		if err := l.Release(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(px.Traffic(netproxy.Up).Chunks-before)/float64(b.N), "requests/op")
}

// BenchmarkSemaphoreAcquireReleaseRequests is
// BenchmarkAcquireReleaseRequests for a semaphore of limit 3.
func BenchmarkSemaphoreAcquireReleaseRequests(b *testing.B) { benchRequests(b, 3) }
