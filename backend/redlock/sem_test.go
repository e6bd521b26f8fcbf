package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

func semOpts(holder string, limit int, ttl time.Duration) backend.AcquireOptions {
	o := opts(holder, ttl)
	o.Limit = limit
	return o
}

// dropCopy removes holder l's slot from one master, as a grant that never
// reached it (or a master that lost it) leaves it.
func dropCopy(t *testing.T, b *Backend, srv *redistest.Server, key string, l backend.Lease) {
	t.Helper()
	sl := l.(*semLease)
	n, c := b.names(key), srv.Client(t)
	if c.ZRem(t.Context(), n.sem[1], sl.value).Val() != 1 || c.HDel(t.Context(), n.slotOf, fmt.Sprint(sl.index)).Val() != 1 {
		t.Fatalf("holder %d has no slot on %s", l.Token(), srv.Addr())
	}
}

// Each holder on a majority, and no master with more than the limit, is
// not enough: 3 masters, limit 2, A on {m1, m3}, B on {m1, m2} leaves m2
// and m3 with a free slot each, and C on {m2, m3} would make three
// holders of majorities. Slot indexes refuse C: A's index is taken on m3,
// B's on m2.
func TestSemMajoritiesNeverExceedTheLimit(t *testing.T) {
	srvs := masters(t, 3)
	b := open(t, urlOf(srvs))
	a := backendtest.MustAcquire(t, b, "k", semOpts("a", 2, time.Minute))
	bb := backendtest.MustAcquire(t, b, "k", semOpts("b", 2, time.Minute))
	dropCopy(t, b, srvs[1], "k", a)
	dropCopy(t, b, srvs[2], "k", bb)
	_, err := b.Acquire(t.Context(), "k", semOpts("c", 2, time.Minute))
	var held *backend.HeldError
	if !errors.As(err, &held) || len(held.Status.Holders) != 2 {
		t.Fatalf("C's Acquire beside A and B, each on a majority = %v; want a *HeldError naming both", err)
	}
	for _, l := range []backend.Lease{a, bb} {
		if err := l.Renew(t.Context()); err != nil {
			t.Errorf("holder %d on a majority: Renew = %v", l.Token(), err)
		}
	}
}

// A master restarted empty under live holders does not let a third
// holder in: the others still give both slots away.
func TestSemMasterRestartedEmptyKeepsTheLimit(t *testing.T) {
	srvs := masters(t, 3)
	b := open(t, urlOf(srvs))
	held := []backend.Lease{
		backendtest.MustAcquire(t, b, "k", semOpts("a", 2, time.Minute)),
		backendtest.MustAcquire(t, b, "k", semOpts("b", 2, time.Minute)),
	}
	srvs[0].Restart()
	if _, err := b.Acquire(t.Context(), "k", semOpts("c", 2, time.Minute)); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("Acquire with a master restarted empty under two holders = %v, want ErrHeld", err)
	}
	for _, l := range held {
		if err := l.Renew(t.Context()); err != nil {
			t.Errorf("Renew of a holder that kept a majority: %v", err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Errorf("Release of a holder that kept a majority: %v", err)
		}
	}
	l := backendtest.MustAcquire(t, b, "k", semOpts("c", 2, time.Minute))
	if l.Token() <= held[1].Token() {
		t.Errorf("token %d after %d", l.Token(), held[1].Token())
	}
}

// With one master down, a semaphore still grants, renews, hands off and
// releases on the majority left.
func TestSemMinorityDownStillWorks(t *testing.T) {
	srvs := masters(t, 3)
	b := open(t, urlOf(srvs))
	srvs[2].Stop()
	held := []backend.Lease{
		backendtest.MustAcquire(t, b, "k", semOpts("a", 2, time.Minute)),
		backendtest.MustAcquire(t, b, "k", semOpts("b", 2, time.Minute)),
	}
	o := semOpts("w", 2, time.Minute)
	o.Wait = true
	got := make(chan backend.Lease, 1)
	go func() {
		l, err := open(t, urlOf(srvs)).Acquire(t.Context(), "k", o)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	time.Sleep(100 * time.Millisecond)
	if err := held[0].Renew(t.Context()); err != nil {
		t.Fatalf("Renew with a master down: %v", err)
	}
	begin := time.Now()
	if err := held[0].Release(t.Context()); err != nil {
		t.Fatalf("Release with a master down: %v", err)
	}
	select {
	case l := <-got:
		if took := time.Since(begin); took > time.Second {
			t.Errorf("hand-off with a master down took %v", took)
		}
		if l != nil {
			l.Release(t.Context())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never got the released slot")
	}
	held[1].Release(t.Context())
}

// Many acquirers racing for the slots of a semaphore on 3 masters never
// hold more than the limit at once, by the holders' own count.
func TestSemRacersNeverExceedTheLimit(t *testing.T) {
	const limit, n, rounds = 2, 8, 4
	srvs := masters(t, 3)
	raw := urlOf(srvs)
	var inside atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		c := open(t, raw)
		wg.Go(func() {
			for r := range rounds {
				o := semOpts(fmt.Sprint("r", i, "-", r), limit, 2*time.Second)
				o.Wait = true
				l, err := c.Acquire(t.Context(), "k", o)
				if err != nil {
					t.Errorf("racer %d: %v", i, err)
					return
				}
				if now := inside.Add(1); now > limit {
					t.Errorf("%d holders at once in a semaphore of limit %d", now, limit)
				}
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				if err := l.Release(t.Context()); err != nil {
					t.Errorf("racer %d: release: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
}

// A waiter whose ctx ends leaves the queue on every master at once, so
// the waiters behind it are not held back by its entries.
func TestSemWaiterThatGivesUpLeavesEveryQueue(t *testing.T) {
	srvs := masters(t, 3)
	b := open(t, urlOf(srvs))
	for _, h := range []string{"a", "b"} {
		backendtest.MustAcquire(t, b, "k", semOpts(h, 2, time.Minute))
	}
	q := b.names("k").sem[3]
	var clients []*goredis.Client
	for _, s := range srvs {
		clients = append(clients, s.Client(t))
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		o := semOpts("quitter", 2, time.Minute)
		o.Wait = true
		_, err := open(t, urlOf(srvs)).Acquire(ctx, "k", o)
		done <- err
	}()
	for queued := 0; queued < len(srvs); time.Sleep(time.Millisecond) {
		queued = 0
		for _, c := range clients {
			queued += int(c.ZCard(t.Context(), q).Val())
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	for i, c := range clients {
		if n := c.ZCard(t.Context(), q).Val(); n != 0 {
			t.Errorf("%d waiters still queued on %s after the only one gave up", n, srvs[i].Addr())
		}
	}
}

// A plain grant and a semaphore's racing for a free key on 3 masters: one
// kind wins, never both; the other is refused (a *LimitError once a
// majority shows the winner, ErrHeld while the masters are split).
func TestSemLimitMismatchRacingAGrant(t *testing.T) {
	raw := urlOf(masters(t, 3))
	b, other := open(t, raw), open(t, raw)
	for round := range 20 {
		key := fmt.Sprint("k", round)
		var wg sync.WaitGroup
		var plain, sem backend.Lease
		var perr, serr error
		wg.Go(func() { plain, perr = b.Acquire(t.Context(), key, opts("plain", time.Minute)) })
		wg.Go(func() { sem, serr = other.Acquire(t.Context(), key, semOpts("sem", 3, time.Minute)) })
		wg.Wait()
		if perr == nil && serr == nil {
			t.Fatalf("round %d: a plain lock and a semaphore were both granted", round)
		}
		for _, err := range []error{perr, serr} {
			if err != nil && !errors.Is(err, backend.ErrLimitMismatch) && !errors.Is(err, backend.ErrHeld) {
				t.Errorf("round %d: the loser's Acquire = %v, want a LimitError or ErrHeld", round, err)
			}
		}
		for _, l := range []backend.Lease{plain, sem} {
			if l != nil {
				l.Release(t.Context())
			}
		}
	}
}
