package redlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// Masters restarted without persistence forget the copies of a lease
// whose holder still runs. When the copies that survive are out of reach,
// nothing on the masters that answer says the lock is taken: a master up
// for less than the restart wait (by default the run's TTL) grants nothing
// new, so no second holder is granted while the first may still run.
func TestRestartedMajorityGrantsNothingNew(t *testing.T) {
	const ttl = 2 * time.Second
	srv := masters(t, 3)
	b := open(t, "redlock://"+hostsOf(srv)+"/0") // the default wait: the run's TTL
	waitClosed(t, b, "k", opts("a", ttl), time.Now())

	srv[0].Restart()
	srv[1].Restart()
	srv[2].Freeze() // the one copy left, out of reach
	defer srv[2].Thaw()
	_, err := b.Acquire(t.Context(), "k", opts("b", ttl))
	var held *backend.HeldError
	if !errors.As(err, &held) || !strings.Contains(held.Status.Holder, "restart_wait") || held.Status.TTL <= 0 || held.Status.TTL > ttl {
		t.Fatalf("Acquire on two masters restarted empty, the third frozen = %v; want ErrHeld naming restart_wait, for at most %v", err, ttl)
	}
}

// The wait holds for a semaphore's slots as for a plain lock, and for the
// first grant on masters that have just started: they may be restarts.
func TestFreshMastersGrantAfterTheWait(t *testing.T) {
	for _, limit := range []int{1, 2} {
		t.Run(map[int]string{1: "lock", 2: "semaphore"}[limit], func(t *testing.T) {
			t.Parallel()
			srv := masters(t, 3)
			started := time.Now()
			b := open(t, "redlock://"+hostsOf(srv)+"/0?restart_wait=2s")
			o := opts("h", time.Second)
			o.Limit = limit
			waitClosed(t, b, "k", o, started).Release(t.Context())
			if l, err := open(t, urlOf(srv)).Acquire(t.Context(), "k2", o); err != nil {
				t.Errorf("Acquire with restart_wait=0 = %v; want the lock", err)
			} else {
				l.Release(t.Context())
			}
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
