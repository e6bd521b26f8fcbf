package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// Waiters are served in the order they came, also when the holders keep
// the semaphore for several TTLs (as any job longer than its TTL does):
// a waiter that is not at the front must not leave the line when the
// lease it last saw can have expired and rejoin at the back. Through the
// binary, six waiters of --limit 2 --ttl 3 behind holders of 4 s ran as
// 1 4 5 6 2 3.
func TestSemaphoreWaitersKeepTheirOrderPastTheTTL(t *testing.T) {
	backendtest.KnownBug(t, "postgres semaphore waiters lose their order once holders keep the key past one TTL")
	raw := pgtest.Isolated(t, pgtest.Shared())
	const key, limit, waiters = "k", 2, 4
	ttl := time.Second
	holders := make([]backend.Lease, limit)
	for i := range holders {
		o := semOpts(fmt.Sprint("holder", i), limit)
		o.TTL = ttl
		l, err := open(t, raw).Acquire(t.Context(), key, o)
		if err != nil {
			t.Fatal(err)
		}
		holders[i] = l
	}
	order := make(chan int, waiters)
	for i := range waiters {
		b := open(t, raw)
		go func() {
			o := semOpts(fmt.Sprint("waiter", i), limit)
			o.TTL, o.Wait = ttl, true
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := b.Acquire(ctx, key, o)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				order <- -1
				return
			}
			order <- i
			_ = l.Release(context.Background())
		}()
		time.Sleep(200 * time.Millisecond) // each waiter is in line before the next comes
	}
	// The holders renew for three TTLs, then leave one at a time.
	for end := time.Now().Add(3 * ttl); time.Now().Before(end); time.Sleep(ttl / 4) {
		for _, h := range holders {
			if err := h.Renew(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, h := range holders {
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var got []int
	for range waiters {
		got = append(got, <-order)
	}
	for i, w := range got {
		if w != i {
			t.Fatalf("waiters were served in the order %v; want 0 1 2 3, the order they came", got)
		}
	}
}
