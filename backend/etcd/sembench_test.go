package etcd

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

func BenchmarkSemaphoreAcquireRelease(b *testing.B) {
	srv := etcdtest.Start(b)
	backendtest.BenchAcquireRelease(b, openTest(b, srv.URL()), backendtest.Key(nil), semOpts("a", 3, false))
}

// BenchmarkSemaphoreHandoff is BenchmarkHandoff for a semaphore of limit
// 2 whose other slot stays held: release → the next waiter's Acquire
// returns, with 1 waiter and with 100 queued.
func BenchmarkSemaphoreHandoff(b *testing.B) {
	for _, waiters := range []int{1, 100} {
		b.Run(fmt.Sprint("waiters=", waiters), func(b *testing.B) {
			srv := etcdtest.Start(b)
			clients := make([]*Backend, waiters+1)
			for i := range clients {
				clients[i] = openTest(b, srv.URL())
			}
			c := srv.Client(b)
			var lat []time.Duration
			for b.Loop() {
				lat = append(lat, semHandoffs(b, c, clients)...)
			}
			backendtest.ReportLatencies(b, lat)
		})
	}
}

// semHandoffs fills a semaphore of limit 2 (one holder on clients[0] that
// keeps its slot), queues the others in order, then has each holder of
// the other slot release at once; it returns each release-to-grant time.
func semHandoffs(b *testing.B, c *clientv3.Client, clients []*Backend) []time.Duration {
	const limit = 2
	key := backendtest.Key(nil)
	o := semOpts("keeper", limit, false)
	o.TTL = time.Minute
	keeper, err := clients[0].Acquire(b.Context(), key, o)
	if err != nil {
		b.Fatal(err)
	}
	defer keeper.Release(context.Background())
	o.Holder, o.RunID = "first", "run-first" // outlives the queueing: released, not expired
	first, err := clients[0].Acquire(b.Context(), key, o)
	if err != nil {
		b.Fatal(err)
	}
	n := len(clients) - 1
	var mu sync.Mutex
	acquired, released := make([]time.Time, n+1), make([]time.Time, n+1)
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			l, err := clients[i].Acquire(b.Context(), key, semOpts(fmt.Sprint("w", i), limit, true))
			if err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			acquired[i], released[i] = time.Now(), time.Now()
			mu.Unlock()
			l.Release(context.Background())
		})
		waitQueued(b, c, key, i+2)
	}
	released[0] = time.Now()
	first.Release(b.Context())
	wg.Wait()
	lat := make([]time.Duration, n)
	for i := range lat {
		lat[i] = acquired[i+1].Sub(released[i])
	}
	return lat
}
