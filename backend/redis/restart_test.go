package redis

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// A restart without persistence loses every lock on the server while its
// holders' commands still run: a free lock is not granted until the
// server has been up for the restart wait (by default the run's TTL), by
// which time the old holder's renewal has failed and its command is dead.
// So no run is granted the lock right after a restart, and a waiter is
// granted it once the wait is over.
func TestRestartKeepsLostLocksClosed(t *testing.T) {
	for _, limit := range []int{1, 2} {
		t.Run(map[int]string{1: "lock", 2: "semaphore"}[limit], func(t *testing.T) {
			t.Parallel()
			const ttl = 2 * time.Second
			srv := redistest.Start(t)
			b := open(t, "redis://"+srv.Addr()+"/0")
			o := opts("h", ttl)
			o.Limit = limit
			// A server that has just started is one that may have lost its
			// data: the first grant waits too.
			started := time.Now()
			holder := waitClosed(t, b, o, started)
			srv.Restart()
			restarted := time.Now()
			if _, err := b.Acquire(t.Context(), "k", o); !errors.Is(err, backend.ErrHeld) {
				t.Fatalf("Acquire right after a restart that lost the lock = %v; want ErrHeld", err)
			}
			if err := holder.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
				t.Errorf("the old holder's Renew after the restart = %v; want ErrLost", err)
			}
			waitClosed(t, b, o, restarted).Release(t.Context())
		})
	}
}

// waitClosed checks that a run that does not wait is refused, naming the
// restart and the time left, and that a waiter is granted the lock once
// the server (started at or after started) has been up for o.TTL, not before.
func waitClosed(t *testing.T, b *Backend, o backend.AcquireOptions, started time.Time) backend.Lease {
	t.Helper()
	_, err := b.Acquire(t.Context(), "k", o)
	var held *backend.HeldError
	if !errors.As(err, &held) || held.Status.TTL <= 0 || held.Status.TTL > o.TTL {
		t.Fatalf("Acquire on a server up for %v = %v; want ErrHeld for at most %v", time.Since(started), err, o.TTL)
	}
	o.Wait = true
	l := backendtest.MustAcquire(t, b, "k", o)
	if up := time.Since(started); up < o.TTL {
		t.Errorf("granted %v after the server's start; want %v at least", up, o.TTL)
	}
	return l
}

// restart_wait=0 turns the wait off: the lock is granted at once.
func TestRestartWaitOff(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, "redis://"+srv.Addr()+"/0?restart_wait=0")
	backendtest.MustAcquire(t, b, "k", opts("h", time.Minute)).Release(t.Context())
}

// The wait needs INFO: an ACL user without it (-@dangerous) gets one line
// that says so and how to fix it (exit 77), never a grant or an outage.
func TestRestartWaitNeedsInfo(t *testing.T) {
	srv := redistest.Start(t, "--user", "app", "on", ">pw", "~*", "&*", "+@all", "-@dangerous", "--user", "default", "off")
	b := open(t, "redis://app:pw@"+srv.Addr()+"/0")
	_, err := b.Acquire(t.Context(), "k", opts("h", time.Minute))
	if !errors.Is(err, backend.ErrPermission) || errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "+info") {
		t.Errorf("Acquire as a user without INFO = %v; want ErrPermission naming +info", err)
	}
	b = open(t, "redis://app:pw@"+srv.Addr()+"/0?restart_wait=0")
	backendtest.MustAcquire(t, b, "k", opts("h", time.Minute)).Release(t.Context())
}

// The wait is restart_wait when the URL sets it, else the longer of the
// run's TTL and its min-hold; it is counted from the server's start, never
// short of it though INFO tells the uptime in whole seconds. Runs that do
// not wait try every 25ms from before the server starts: the first grant
// must come no sooner than the wait after that.
func TestRestartWaitLasts(t *testing.T) {
	const wait = 3 * time.Second
	cases := []struct {
		name, query  string
		ttl, minHold time.Duration
	}{
		{"restart_wait", "?restart_wait=3s", time.Second, 0},
		{"min-hold", "", time.Second, wait},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			started := time.Now()
			srv := redistest.Start(t)
			b := open(t, "redis://"+srv.Addr()+"/0"+c.query)
			o := opts("h", c.ttl)
			o.MinHold = c.minHold
			for {
				l, err := b.Acquire(t.Context(), "k", o)
				if err == nil {
					if up := time.Since(started); up < wait || up > wait+2*time.Second {
						t.Errorf("granted %v after the server's start; want %v to %v", up, wait, wait+2*time.Second)
					}
					l.Release(t.Context())
					return
				}
				if !errors.Is(err, backend.ErrHeld) || time.Since(started) > 2*wait {
					t.Fatalf("Acquire %v after the server's start = %v", time.Since(started), err)
				}
				time.Sleep(25 * time.Millisecond)
			}
		})
	}
}
