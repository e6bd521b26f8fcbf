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

// Benchmarks against a private etcd on loopback (fsync on, as in
// production): go test -run '^$' -bench . ./backend/etcd

func BenchmarkAcquireRelease(b *testing.B) {
	srv := etcdtest.Start(b)
	backendtest.BenchAcquireRelease(b, openTest(b, srv.URL()), backendtest.Key(nil), opts("a", false))
}

func BenchmarkRenew(b *testing.B) {
	srv := etcdtest.Start(b)
	backendtest.BenchRenew(b, openTest(b, srv.URL()), backendtest.Key(nil), opts("a", false))
}

// BenchmarkHandoff measures release → the next waiter's Acquire returns,
// with 1 waiter and with 100 queued: each release wakes only the next in
// line, so the cost should not grow with the queue.
func BenchmarkHandoff(b *testing.B) {
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
				lat = append(lat, handoffs(b, c, clients)...)
			}
			backendtest.ReportLatencies(b, lat)
		})
	}
}

// handoffs lets clients[0] take a key, queues the others in order, then
// has each holder release at once; it returns each release-to-grant time.
func handoffs(b *testing.B, c *clientv3.Client, clients []*Backend) []time.Duration {
	key := backendtest.Key(nil)
	first, err := clients[0].Acquire(b.Context(), key, opts("h", false))
	if err != nil {
		b.Fatal(err)
	}
	n := len(clients) - 1
	var mu sync.Mutex
	acquired, released := make([]time.Time, n+1), make([]time.Time, n+1)
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			l, err := clients[i].Acquire(b.Context(), key, opts(fmt.Sprint("w", i), true))
			if err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			acquired[i], released[i] = time.Now(), time.Now()
			mu.Unlock()
			l.Release(context.Background())
		})
		waitQueued(b, c, key, i+1)
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

// BenchmarkTurnRead measures the read that tells the next in line its
// turn has come (predecessorAt, at the release's revision), with 1 and
// with 1000 entries queued behind it: it reads the entries named up to
// the reader's own, so the queue's length should not show.
func BenchmarkTurnRead(b *testing.B) {
	for _, queued := range []int{1, 1000} {
		b.Run(fmt.Sprint("queued=", queued), func(b *testing.B) {
			srv := etcdtest.Start(b)
			be, key := openTest(b, srv.URL()), backendtest.Key(nil)
			var line []*entry
			for i := range queued + 1 {
				line = append(line, queueEntry(b, be, key, fmt.Sprint(i)))
			}
			del, err := srv.Client(b).Delete(b.Context(), line[0].name)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if prev, _, err := be.predecessorAt(b.Context(), line[1], del.Header.Revision); err != nil || prev != "" {
					b.Fatalf("the front's turn read: %q, %v", prev, err)
				}
			}
		})
	}
}

// BenchmarkJoin measures the transaction that queues a newcomer
// (enqueue), behind 1 and behind 1000 entries: it reads the entry named
// first, not the whole queue (see oldestAt). The grant and the revoke
// around it are not timed.
func BenchmarkJoin(b *testing.B) {
	for _, queued := range []int{1, 1000} {
		b.Run(fmt.Sprint("queued=", queued), func(b *testing.B) {
			srv := etcdtest.Start(b)
			be, key := openTest(b, srv.URL()), backendtest.Key(nil)
			join := func(i int) entry {
				e, err := be.grant(b.Context(), key, time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				holder, err := be.enqueue(b.Context(), &e, opts(fmt.Sprint(i), true), true)
				b.StopTimer()
				if err != nil || i > 0 && holder == nil {
					b.Fatalf("queueing %d: holder %v, %v", i, holder, err)
				}
				return e
			}
			b.StopTimer()
			for i := range queued {
				queueEntry(b, be, key, fmt.Sprint(i))
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				be.revoke(b.Context(), join(queued+i).id)
			}
		})
	}
}
