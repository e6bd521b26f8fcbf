package file

import (
	"context"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// A release tells the backend whether someone waits for the key, a plain
// lock's waiter or a semaphore's, so that Close lingers (see closeDelay)
// only when the lock was handed on: a run that hands it on keeps its exit
// out of the next holder's start, and one that does not exits at once.
func TestReleaseTellsWhetherSomeoneWaits(t *testing.T) {
	for _, limit := range []int{1, 2} {
		for _, waiter := range []bool{false, true} {
			dir := t.TempDir()
			b, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			o := opts("holder")
			if limit > 1 {
				o = semOpts("holder", limit)
			}
			var held []backend.Lease
			for i := range limit {
				o.RunID = "holder" + string(rune('a'+i))
				l, err := b.Acquire(t.Context(), "k", o)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, l)
			}
			got := make(chan backend.Lease, 1)
			if waiter {
				w, err := Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				wo := o
				wo.RunID, wo.Wait = "waiter", true
				go func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					l, err := w.Acquire(ctx, "k", wo)
					if err != nil {
						t.Errorf("waiter: %v", err)
					}
					got <- l
				}()
				time.Sleep(300 * time.Millisecond) // in its wait
			}
			if err := held[0].Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			if b.handedOn.Load() != waiter {
				t.Errorf("limit %d, someone waiting %v: the release says %v", limit, waiter, b.handedOn.Load())
			}
			if waiter {
				if l := <-got; l != nil {
					_ = l.Release(t.Context())
				}
			}
			for _, l := range held[1:] {
				_ = l.Release(t.Context())
			}
		}
	}
}
