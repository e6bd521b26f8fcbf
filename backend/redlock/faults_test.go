package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// With a minority of the masters down, everything still works: acquire,
// exclusion, renew, status, waiting woken at once by a release, and
// tokens that grow.
func TestMinorityDownStillWorks(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d-masters", n), func(t *testing.T) {
			servers := masters(t, n)
			a, b := open(t, urlOf(servers)), open(t, urlOf(servers))
			for _, s := range servers[:n-(n/2+1)] {
				s.Stop()
			}
			l := backendtest.MustAcquire(t, a, "k", opts("alice", time.Minute))
			if _, err := b.Acquire(t.Context(), "k", opts("bob", time.Minute)); !errors.Is(err, backend.ErrHeld) {
				t.Errorf("second Acquire = %v, want ErrHeld", err)
			}
			if err := l.Renew(t.Context()); err != nil {
				t.Errorf("Renew: %v", err)
			}
			if st, err := b.Inspect(t.Context(), "k"); err != nil || !st.Held || st.Holder != "alice" || st.Token != l.Token() {
				t.Errorf("Inspect = %+v, %v; want held by alice with token %d", st, err, l.Token())
			}
			got := waiter(t, b, "k", "bob")
			time.Sleep(50 * time.Millisecond)
			released := time.Now()
			if err := l.Release(t.Context()); err != nil {
				t.Fatalf("Release: %v", err)
			}
			w := <-got
			if took := time.Since(released); took > 500*time.Millisecond {
				t.Errorf("the waiter woke %v after the release", took)
			}
			if w == nil || w.Token() <= l.Token() {
				t.Fatalf("waiter's lease %v; want a token above %d", w, l.Token())
			}
			w.Release(t.Context())
		})
	}
}

// waiter starts a waiting Acquire of key and returns where its lease
// (nil on error) arrives.
func waiter(t *testing.T, b *Backend, key, holder string) <-chan backend.Lease {
	got := make(chan backend.Lease, 1)
	go func() {
		o := opts(holder, time.Minute)
		o.Wait = true
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		l, err := b.Acquire(ctx, key, o)
		if err != nil {
			t.Errorf("waiter %s: %v", holder, err)
		}
		got <- l
	}()
	return got
}

// With a majority down nothing is granted or kept: Renew (with the
// heartbeat's deadline), Acquire and OpenURL fail, each well within the
// lease, and the holder's Renew never reports success.
func TestMajorityDownFails(t *testing.T) {
	servers := masters(t, 3)
	b := open(t, urlOf(servers))
	l := backendtest.MustAcquire(t, b, "k", opts("alice", time.Second))
	servers[0].Stop()
	servers[1].Freeze() // a master that hangs, not one that refuses
	begin := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second/3)
	defer cancel()
	if err := l.Renew(ctx); !errors.Is(err, backend.ErrUnavailable) || time.Since(begin) > time.Second/2 {
		t.Errorf("Renew with a majority down = %v after %v, want ErrUnavailable by its deadline", err, time.Since(begin))
	}
	begin = time.Now()
	rctx, rcancel := context.WithTimeout(t.Context(), 250*time.Millisecond)
	defer rcancel()
	if err := l.Release(rctx); err == nil || time.Since(begin) > 450*time.Millisecond {
		t.Errorf("Release with a majority down = %v after %v, want an error by its 250ms deadline", err, time.Since(begin))
	}
	begin = time.Now()
	if _, err := b.Acquire(t.Context(), "other", opts("bob", time.Second)); !errors.Is(err, backend.ErrUnavailable) || time.Since(begin) > time.Second {
		t.Errorf("Acquire with a majority down = %v after %v, want ErrUnavailable within the 1s ttl", err, time.Since(begin))
	}
	servers[1].Thaw()
	servers[1].Stop()
	begin = time.Now()
	if _, err := tryOpen(urlOf(servers)); !errors.Is(err, backend.ErrUnavailable) || time.Since(begin) > 3*time.Second {
		t.Errorf("OpenURL with a majority down = %v after %v, want ErrUnavailable", err, time.Since(begin))
	}
}

// Tokens keep growing when masters lose their counters or stop, without
// help from the clock: every counter is first set far above it, so only
// a master that kept its counter can carry the token on. Any majority
// shares a master with the masters that recorded the last token.
func TestTokensSurviveLostMasters(t *testing.T) {
	for _, c := range []struct {
		n, lost int
	}{{3, 1}, {5, 2}} {
		t.Run(fmt.Sprintf("%d-masters-%d-restarted-empty", c.n, c.lost), func(t *testing.T) {
			servers := masters(t, c.n)
			b := open(t, urlOf(servers))
			far := uint64(time.Now().Add(24 * time.Hour).UnixMicro())
			for _, s := range servers {
				if err := s.Client(t).Set(t.Context(), b.names("k").counter, far, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			last := grantOnce(t, b, 0, "first grant")
			countersReach(t, b, servers, last)
			for _, s := range servers[:c.lost] {
				s.Stop()
			}
			last = grantOnce(t, b, last, fmt.Sprintf("%d masters down", c.lost))
			for _, s := range servers[:c.lost] {
				s.Restart()
			}
			grantOnce(t, b, last, fmt.Sprintf("%d masters restarted empty", c.lost))
		})
	}
}

// grantOnce takes and releases "k", failing unless its token is above
// last, and returns it.
func grantOnce(t *testing.T, b *Backend, last backend.Token, step string) backend.Token {
	t.Helper()
	l, err := b.Acquire(t.Context(), "k", opts("h", time.Minute))
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	if l.Token() <= last {
		t.Fatalf("%s: token %d is not above the last one, %d", step, l.Token(), last)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatalf("%s: release: %v", step, err)
	}
	return l.Token()
}

// countersReach waits until every master has recorded token: the grant
// returns once a majority has, and the others follow.
func countersReach(t *testing.T, b *Backend, servers []*redistest.Server, token backend.Token) {
	t.Helper()
	for _, s := range servers {
		for deadline := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
			v, _ := s.Client(t).Get(t.Context(), b.names("k").counter).Result()
			if v == token.String() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("master %s recorded token %q, want %d", s.Addr(), v, token)
			}
		}
	}
}

// A master never grants a token that is not above its own counter, so
// that two grants sharing a master are ordered by it; Acquire then tries
// again above the counter.
func TestMasterRefusesATokenNotAboveItsCounter(t *testing.T) {
	servers := masters(t, 3)
	b := open(t, urlOf(servers))
	far := backend.Token(time.Now().Add(time.Hour).UnixMicro())
	r := &request{key: "k", names: b.names("k"), o: opts("h", time.Minute), px: 60000, info: "{}"}
	for _, s := range servers {
		s.Client(t).Set(t.Context(), r.names.counter, far.String(), 0)
	}
	for _, token := range []backend.Token{far - 1, far} {
		for _, x := range b.grant(t.Context(), r, token.String()+" run-h h", token).rs {
			if x.err != nil || x.v.code != grantStale || x.v.counter != far {
				t.Errorf("grant of token %d under counter %d: %+v, %v; want refused as stale", token, far, x.v, x.err)
			}
		}
	}
	if v, _ := servers[0].Client(t).Get(t.Context(), r.names.lock).Result(); v != "" {
		t.Errorf("a refused grant left the lock set to %q", v)
	}
	if tok := grantOnce(t, b, far, "above the counter"); tok != far+1 {
		t.Errorf("token %d, want the counter plus one, %d", tok, far+1)
	}
}

// A frozen master (requests unanswered) costs an acquire nothing while a
// majority answers.
func TestFrozenMasterDoesNotDelayAcquire(t *testing.T) {
	servers := masters(t, 3)
	b := open(t, urlOf(servers))
	servers[2].Freeze()
	defer servers[2].Thaw()
	for i := range 5 {
		begin := time.Now()
		l := backendtest.MustAcquire(t, b, "k"+strconv.Itoa(i), opts("h", time.Second))
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Its peek, grant and release each wait up to min(TTL/12, 100 ms)
		// for the frozen master.
		if took := time.Since(begin); took > 750*time.Millisecond {
			t.Errorf("acquire and release with a frozen master took %v; want well under its 2s read timeout", took)
		}
	}
}

// Two of three masters restarted empty while a lease is held: the third
// still holds it, and no one else may take the lock until that copy is
// released or expires (the holder's next renewal finds its majority gone
// and stops its command). Without the check, a majority of empty masters
// would grant it at once: two holders.
func TestMajorityRestartedEmptyDoesNotGrantAHeldLock(t *testing.T) {
	servers := masters(t, 3)
	a, b := open(t, urlOf(servers)), open(t, urlOf(servers))
	l := backendtest.MustAcquire(t, a, "k", opts("alice", 10*time.Second))
	servers[0].Restart()
	servers[1].Restart()
	for range 3 {
		if w, err := b.Acquire(t.Context(), "k", opts("bob", time.Minute)); !errors.Is(err, backend.ErrHeld) {
			if err == nil {
				w.Release(t.Context())
			}
			t.Fatalf("Acquire with a live copy of alice's lease on one master = %v, want ErrHeld", err)
		}
	}
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("alice's Renew with her majority gone = %v, want ErrLost", err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("alice's Release = %v, want ErrLost (after removing her last copy)", err)
	}
	w := backendtest.MustAcquire(t, b, "k", opts("bob", time.Minute))
	if w.Token() <= l.Token() {
		t.Errorf("bob's token %d is not above alice's %d", w.Token(), l.Token())
	}
}
