package zookeeper

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/backendtest"
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
