package redis

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

func BenchmarkAcquireRelease(b *testing.B) {
	backendtest.BenchAcquireRelease(b, open(b, redistest.Start(b).URL()), "k", opts("h", time.Minute))
}

func BenchmarkRenew(b *testing.B) {
	backendtest.BenchRenew(b, open(b, redistest.Start(b).URL()), "k", opts("h", time.Minute))
}

// BenchmarkHandOff measures the time from a holder's Release to the next
// waiter's Acquire returning, with 1, 10 and 100 waiters queued, and the
// round trips each hand-off costs the server (scripts and subscriptions,
// including the releaser queuing again): flat in the number of waiters.
func BenchmarkHandOff(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("waiters=%d", n), func(b *testing.B) { benchHandOff(b, n) })
	}
}

func benchHandOff(b *testing.B, waiters int) {
	srv := redistest.Start(b)
	c := srv.Client(b)
	h := &handOffs{want: b.N, next: make(chan struct{})}
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	var wg sync.WaitGroup
	roundTrips := serverRoundTrips(b, c)
	b.ResetTimer()
	for i := range waiters + 1 {
		be := open(b, srv.URL())
		wg.Go(func() { h.run(ctx, cancel, be, fmt.Sprint("w", i)) })
	}
	wg.Wait()
	b.StopTimer()
	backendtest.ReportLatencies(b, h.took)
	b.ReportMetric(float64(serverRoundTrips(b, c)-roundTrips)/float64(len(h.took)), "roundtrips/op")
}

// handOffs is the shared state of one hand-off benchmark.
type handOffs struct {
	want     int
	released atomic.Int64 // UnixNano just before the last Release

	mu   sync.Mutex
	took []time.Duration
	next chan struct{} // closed at the next grant
}

// run takes the lock again and again, recording each hand-off, until the
// benchmark has enough of them.
func (h *handOffs) run(ctx context.Context, done context.CancelFunc, be *Backend, holder string) {
	o := opts(holder, time.Minute)
	o.Wait = true
	for {
		l, err := be.Acquire(ctx, "k", o)
		if err != nil {
			return
		}
		h.mu.Lock()
		if at := h.released.Load(); at != 0 {
			h.took = append(h.took, time.Since(time.Unix(0, at)))
		}
		enough := len(h.took) >= h.want
		granted := h.next
		h.next = make(chan struct{})
		close(granted)
		next := h.next
		h.mu.Unlock()
		if enough {
			done()
		}
		h.released.Store(time.Now().UnixNano())
		_ = l.Release(context.Background())
		// Queue again only once the lock has moved on, so the releaser
		// never takes its own lock back.
		select {
		case <-next:
		case <-ctx.Done():
			return
		}
	}
}

// serverRoundTrips counts the requests of ours the server has served:
// scripts and subscriptions.
func serverRoundTrips(b testing.TB, c *goredis.Client) int {
	return commandCalls(b, c, "evalsha", "eval", "subscribe")
}

// BenchmarkSemAcquireRelease is BenchmarkAcquireRelease for a slot of a
// semaphore of limit 4.
func BenchmarkSemAcquireRelease(b *testing.B) {
	o := opts("h", time.Minute)
	o.Limit = 4
	backendtest.BenchAcquireRelease(b, open(b, redistest.Start(b).URL()), "k", o)
}
