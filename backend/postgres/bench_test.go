package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// BenchmarkAcquireRelease takes and gives back a free lock: two
// statements, the first also bumping the fencing counter.
func BenchmarkAcquireRelease(b *testing.B) {
	backendtest.BenchAcquireRelease(b, open(b, pgtest.Isolated(b, pgtest.Shared())), "k", opts("h"))
}

// BenchmarkRenew is one owner-checked extension of a held lease.
func BenchmarkRenew(b *testing.B) {
	backendtest.BenchRenew(b, open(b, pgtest.Isolated(b, pgtest.Shared())), "k", opts("h"))
}

// BenchmarkHandoff measures the time from a holder's Release call to the
// next waiter's Acquire returning, with 1, 10 and 100 waiters queued on one
// key, and the statements all clients send per hand-off. It runs on a
// private server, since 100 waiters need 100 sessions.
func BenchmarkHandoff(b *testing.B) {
	srv := pgtest.Start(b)
	for _, waiters := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("waiters=%d", waiters), func(b *testing.B) {
			benchHandoff(b, pgtest.Isolated(b, srv.URL()), waiters, 1)
		})
	}
}

// BenchmarkSemaphoreHandoff is BenchmarkHandoff for the last free slot of
// a semaphore of limit 4 whose other slots stay held.
func BenchmarkSemaphoreHandoff(b *testing.B) {
	srv := pgtest.Start(b)
	for _, waiters := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("waiters=%d", waiters), func(b *testing.B) {
			benchHandoff(b, pgtest.Isolated(b, srv.URL()), waiters, 4)
		})
	}
}

func benchHandoff(b *testing.B, raw string, waiters, limit int) {
	b.ResetTimer()
	lat, stmts := handOff(b, raw, waiters, b.N, limit)
	b.StopTimer()
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(stmts, "stmts/handoff")
}

// handOff has waiters+1 clients take the lock on one key n times in turn,
// and returns the sorted hand-off latencies and the statements that all
// clients sent per hand-off. With a limit above 1 the key is a semaphore
// whose other limit-1 slots are held throughout, so that the clients take
// turns on its last slot.
func handOff(tb testing.TB, raw string, waiters, n, limit int) ([]time.Duration, float64) {
	for i := range limit - 1 {
		o := semOpts(fmt.Sprint("kept", i), limit)
		o.TTL = time.Hour
		if _, err := open(tb, raw).Acquire(context.Background(), "k", o); err != nil {
			tb.Fatal(err)
		}
	}
	var stmts atomic.Int64
	h := &handoffs{left: n, grants: make(chan struct{}), limit: limit}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range waiters + 1 { // one holds, the others wait
		be := open(tb, raw)
		be.conns.cfg.Tracer = counter{&stmts}
		wg.Go(func() { h.take(ctx, cancel, be, fmt.Sprint("w", i)) })
	}
	wg.Wait()
	slices.Sort(h.lat)
	return h.lat, float64(stmts.Load()) / float64(len(h.lat))
}

// handoffs has clients take turns on one key until left turns are done.
// A client that released rejoins the queue only after the next grant, so
// that every measured grant is a hand-off to a waiter.
type handoffs struct {
	mu       sync.Mutex
	left     int
	released time.Time
	lat      []time.Duration
	grants   chan struct{} // closed and replaced at every grant
	limit    int
}

func (h *handoffs) take(ctx context.Context, stop context.CancelFunc, be *Backend, holder string) {
	o := semOpts(holder, h.limit)
	o.Wait = true
	for {
		l, err := be.Acquire(ctx, "k", o)
		if err != nil {
			return // stopped
		}
		h.mu.Lock()
		if !h.released.IsZero() {
			h.lat = append(h.lat, time.Since(h.released))
		}
		h.left--
		done, next := h.left < 0, h.grants
		close(h.grants)
		h.grants = make(chan struct{})
		h.released = time.Now()
		h.mu.Unlock()
		if done {
			stop()
		}
		_ = l.Release(context.Background())
		if done {
			return
		}
		select {
		case <-next:
		case <-ctx.Done():
			return
		}
	}
}

// counter counts the statements a client sends.
type counter struct{ n *atomic.Int64 }

func (c counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// BenchmarkSemaphoreAcquireRelease takes and gives back a slot of a
// semaphore of limit 4 whose other three slots are held: one statement
// each, on a row that carries every holder.
func BenchmarkSemaphoreAcquireRelease(b *testing.B) {
	be := semaphoreOf(b, 3)
	backendtest.BenchAcquireRelease(b, be, "k", semOpts("h", 4))
}

// BenchmarkSemaphoreRenew renews one of a semaphore's four holders.
func BenchmarkSemaphoreRenew(b *testing.B) {
	be := semaphoreOf(b, 3)
	backendtest.BenchRenew(b, be, "k", semOpts("h", 4))
}

// semaphoreOf returns a backend whose key "k", a semaphore of limit 4,
// has n holders that outlast the benchmark.
func semaphoreOf(b *testing.B, n int) *Backend {
	be := open(b, pgtest.Isolated(b, pgtest.Shared()))
	for i := range n {
		o := semOpts(fmt.Sprint("other", i), 4)
		o.TTL = time.Hour
		if _, err := be.Acquire(b.Context(), "k", o); err != nil {
			b.Fatal(err)
		}
	}
	return be
}
