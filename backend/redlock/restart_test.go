package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/redistest"
)

// Masters restarted without persistence forget the copies of a lease
// whose holder still runs. When the copies that survive are out of reach,
// nothing on the masters that answer says the lock is taken: a master up
// for less than the restart wait (by default the run's TTL) grants nothing
// new, so no second holder is granted while the first may still run.
func TestRestartedMajorityGrantsNothingNew(t *testing.T) {
	const ttl = 2 * time.Second
	started := time.Now()
	srv := masters(t, 3)
	b := open(t, "redlock://"+hostsOf(srv)+"/0") // the default wait: the run's TTL
	waitClosed(t, b, "k", opts("a", ttl), started)

	srv[0].Restart()
	srv[1].Restart()
	srv[2].Freeze() // the one copy left, out of reach
	defer srv[2].Thaw()
	_, err := b.Acquire(t.Context(), "k", opts("b", ttl))
	var held *backend.HeldError
	if !errors.As(err, &held) || !strings.Contains(held.Status.Holder, "restart_wait") || held.Status.TTL <= 0 || held.Status.TTL > ttl*9/8 {
		t.Fatalf("Acquire on two masters restarted empty, the third frozen = %v; want ErrHeld naming restart_wait, for at most %v and a jitter", err, ttl)
	}
}

// The wait holds for a semaphore's slots as for a plain lock, and for the
// first grant on masters that have just started: they may be restarts.
func TestFreshMastersGrantAfterTheWait(t *testing.T) {
	for _, limit := range []int{1, 2} {
		t.Run(map[int]string{1: "lock", 2: "semaphore"}[limit], func(t *testing.T) {
			t.Parallel()
			started := time.Now()
			srv := masters(t, 3)
			o := opts("h", time.Second)
			o.Limit = limit
			if l, err := open(t, urlOf(srv)).Acquire(t.Context(), "k0", o); err != nil {
				t.Errorf("Acquire with restart_wait=0 on masters just started = %v; want the lock", err)
			} else {
				l.Release(t.Context())
			}
			b := open(t, "redlock://"+hostsOf(srv)+"/0?restart_wait=2s")
			waitClosed(t, b, "k", o, started).Release(t.Context())
		})
	}
}

// waitClosed checks that a run that does not wait is refused on masters
// started at or after started, naming restart_wait, and that a waiter is
// granted the lock once they have been up for the wait (2s, or o.TTL when
// longer), not before.
func waitClosed(t *testing.T, b *Backend, key string, o backend.AcquireOptions, started time.Time) backend.Lease {
	t.Helper()
	wait := max(2*time.Second, o.TTL)
	if b.restartWait < 0 {
		wait = o.TTL
	}
	_, err := b.Acquire(t.Context(), key, o)
	var held *backend.HeldError
	if !errors.As(err, &held) || !strings.Contains(held.Status.Holder, "restart_wait") {
		t.Fatalf("Acquire on masters up for %v = %v; want ErrHeld naming restart_wait", time.Since(started), err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), wait+5*time.Second)
	defer cancel()
	o.Wait = true
	l, err := b.Acquire(ctx, key, o)
	if err != nil {
		t.Fatalf("waiting out the restart wait: %v", err)
	}
	if up := time.Since(started); up < wait {
		t.Errorf("granted %v after the masters' start; want %v at least", up, wait)
	}
	return l
}

// Waiters that start together, on a free lock or one that a restart kept
// closed, are all served soon: the losers of the first race queue behind
// the winner, even those whose peek found the lock still free, and each
// is woken by the release before it, rather than sleeping for the
// holder's TTL. A restart's waiters are also spread when the wait ends.
func TestWaitersThatStartTogetherAreServedSoon(t *testing.T) {
	for name, query := range map[string]string{"free": redistest.NoRestartWait, "restart": "restart_wait=2s"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const ttl, waiters = 10 * time.Second, 8
			srv := masters(t, 3)
			b := open(t, "redlock://"+hostsOf(srv)+"/0?"+query)
			ctx, cancel := context.WithTimeout(t.Context(), ttl)
			defer cancel()
			begin := time.Now()
			errs := make(chan error, waiters)
			for i := range waiters {
				go func() {
					o := opts(fmt.Sprint("w", i), ttl)
					o.Wait = true
					l, err := b.Acquire(ctx, "k", o)
					if err == nil {
						time.Sleep(20 * time.Millisecond)
						err = l.Release(context.Background())
					}
					errs <- err
				}()
			}
			for range waiters {
				if err := <-errs; err != nil {
					t.Errorf("a waiter: %v", err)
				}
			}
			// Eight short holds, after the wait (2s, up to 3s as INFO
			// counts whole seconds) and its jitter: well under the TTL a
			// lost wake-up costs.
			if took := time.Since(begin); took > 6*time.Second {
				t.Errorf("%d waiters served in %v; want within 6s", waiters, took)
			}
		})
	}
}
