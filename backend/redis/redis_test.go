package redis

import (
	"errors"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// open returns a backend on rawURL, closed when the test ends.
func open(t testing.TB, rawURL string) *Backend {
	t.Helper()
	return backendtest.OpenURL(t, rawURL, OpenURL)
}

// tryOpen opens rawURL; the caller closes the backend.
func tryOpen(rawURL string) (*Backend, error) {
	return backendtest.TryOpenURL(rawURL, OpenURL)
}

func opts(holder string, ttl time.Duration) backend.AcquireOptions {
	return backend.AcquireOptions{TTL: ttl, Holder: holder, RunID: "run-" + holder}
}

func TestConformance(t *testing.T) {
	srv := redistest.Start(t)
	backendtest.Run(t, backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, srv.URL()) },
		TTL:  time.Second,
	})
}

// Tokens must keep growing when Redis loses the counter: FLUSHALL, or a
// restart with nothing persisted.
func TestTokensGrowAcrossDataLoss(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv.URL())
	var last backend.Token
	acquire := func(step string) {
		t.Helper()
		l, err := b.Acquire(t.Context(), "k", opts("h", time.Minute))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if l.Token() <= last {
			t.Fatalf("%s: token %d is not above the last one, %d", step, l.Token(), last)
		}
		last = l.Token()
		if err := l.Release(t.Context()); err != nil {
			t.Fatalf("%s: release: %v", step, err)
		}
	}
	acquire("first grant")
	acquire("second grant")
	if err := srv.Client(t).FlushAll(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	acquire("after FLUSHALL")
	srv.Restart()
	acquire("after a restart without persistence")
}

// A lock that holds another value (someone else's grant) is never renewed
// or deleted by a lease that no longer owns it.
func TestForeignValueIsNeverRenewedOrDeleted(t *testing.T) {
	srv := redistest.Start(t)
	b, c := open(t, srv.URL()), srv.Client(t)
	l := backendtest.MustAcquire(t, b, "k", opts("h", time.Minute))
	lock := b.names("k").lock
	const foreign = "99 other-run someone-else"
	if err := c.Set(t.Context(), lock, foreign, 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Renew of a lock holding another value = %v, want ErrLost", err)
	}
	if pttl := c.PTTL(t.Context(), lock).Val(); pttl > 5*time.Second {
		t.Errorf("the other holder's lock was extended to %v", pttl)
	}
	if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Release of a lock holding another value = %v, want ErrLost", err)
	}
	if v := c.Get(t.Context(), lock).Val(); v != foreign {
		t.Errorf("lock value after a stale Release = %q, want the other holder's %q", v, foreign)
	}
	st, err := b.Inspect(t.Context(), "k")
	if err != nil || st.Holder != "someone-else" || st.Token != 99 || st.TTL <= 0 {
		t.Errorf("Inspect = %+v, %v; want held by someone-else with token 99 and time left", st, err)
	}
}

// A retried acquire whose first reply was lost gets its own grant back
// instead of finding the lock "held".
func TestRetriedAcquireGetsItsOwnGrant(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv.URL())
	o := opts("h", time.Minute)
	first := backendtest.MustAcquire(t, b, "k", o)
	again, err := b.Acquire(t.Context(), "k", o)
	if err != nil || again.Token() != first.Token() {
		t.Fatalf("retried Acquire = %v, %v; want the same grant, token %d", again, err, first.Token())
	}
	if _, err := b.Acquire(t.Context(), "k", opts("other", time.Minute)); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("another run's Acquire = %v, want ErrHeld", err)
	}
}

func TestOperators(t *testing.T) {
	srv := redistest.Start(t)
	backendtest.RunOperators(t, backendtest.Operators{Harness: backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, srv.URL()) },
		TTL:  time.Second,
	}})
}

func TestSemaphores(t *testing.T) {
	srv := redistest.Start(t)
	backendtest.RunSemaphores(t, backendtest.Operators{Harness: backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, srv.URL()) },
		TTL:  time.Second,
	}})
}

func TestRevoke(t *testing.T) {
	srv := redistest.Start(t)
	backendtest.RunRevoke(t, backendtest.Operators{Harness: backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, srv.URL()) },
		TTL:  time.Second,
	}})
}
