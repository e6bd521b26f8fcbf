package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// fillSem takes key with n holders of a semaphore of limit, leases of ttl.
func fillSem(t *testing.T, b *Backend, key string, n, limit int, ttl time.Duration) []backend.Lease {
	t.Helper()
	var held []backend.Lease
	for i := range n {
		held = append(held, backendtest.MustAcquire(t, b, key, semOpts(fmt.Sprint("h", i), limit, ttl)))
	}
	return held
}

// semQueued starts a semaphore waiter on key and returns once it is in
// the queue.
func semQueued(t *testing.T, b *Backend, c *goredis.Client, ctx context.Context, key, holder string, limit int) <-chan backend.Lease {
	t.Helper()
	q := b.names(key).sem[3]
	before := c.ZCard(t.Context(), q).Val()
	got := make(chan backend.Lease, 1)
	go func() {
		o := semOpts(holder, limit, time.Minute)
		o.Wait = true
		l, err := b.Acquire(ctx, key, o)
		if err != nil && ctx.Err() == nil {
			t.Errorf("waiter %s: %v", holder, err)
		}
		got <- l
	}()
	for c.ZCard(t.Context(), q).Val() == before {
		time.Sleep(time.Millisecond)
	}
	return got
}

// ghost queues a waiter that no lockrun runs, before every other waiter,
// with its entry ending after life; listening, it stands for a frozen
// waiter, else for one whose process died.
func ghost(t *testing.T, b *Backend, c *goredis.Client, key string, life time.Duration, listening bool) {
	t.Helper()
	n := b.names(key)
	now := time.Now()
	c.ZAdd(t.Context(), n.sem[3], goredis.Z{Score: float64(now.UnixMicro() - 1e6), Member: "ghost"})
	c.ZAdd(t.Context(), n.sem[4], goredis.Z{Score: float64(now.Add(life).UnixMilli()), Member: "ghost"})
	if listening {
		ps := c.Subscribe(t.Context(), n.wake+"ghost")
		if _, err := ps.Receive(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ps.Close() })
	}
}

// A waiter whose process died (nobody listens on its channel) never holds
// a slot back: a release, or a slot freed by expiry, goes to the live
// waiter behind it at once.
func TestSemCrashedWaiterFallsOut(t *testing.T) {
	srv := redistest.Start(t)
	b, c := open(t, srv.URL()), srv.Client(t)
	for _, byExpiry := range []bool{false, true} {
		key := fmt.Sprint("k", byExpiry)
		ttl := time.Minute
		if byExpiry {
			ttl = 500 * time.Millisecond
		}
		held := fillSem(t, b, key, 1, 2, ttl) // the slot that frees
		backendtest.MustAcquire(t, b, key, semOpts("stays", 2, time.Minute))
		next := semQueued(t, open(t, srv.URL()), c, t.Context(), key, "next", 2)
		ghost(t, b, c, key, time.Hour, false)
		begin := time.Now()
		if !byExpiry {
			if err := held[0].Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case l := <-next:
			if took := time.Since(begin); took > ttl+time.Second {
				t.Errorf("byExpiry %v: the waiter behind a dead one got the slot after %v", byExpiry, took)
			}
			if c.ZScore(t.Context(), b.names(key).sem[3], "ghost").Err() == nil {
				t.Errorf("byExpiry %v: the dead waiter is still queued", byExpiry)
			}
			l.Release(t.Context())
		case <-time.After(ttl + 5*time.Second):
			t.Fatalf("byExpiry %v: the waiter behind a dead one never got the slot", byExpiry)
		}
	}
}

// A frozen waiter (its connection open, not trying) keeps its place until
// its queue entry ends, and not longer: then the waiter behind it, or a
// newcomer, gets the free slot.
func TestSemFrozenWaiterKeepsItsPlaceUntilItsEntryEnds(t *testing.T) {
	srv := redistest.Start(t)
	b, c := open(t, srv.URL()), srv.Client(t)
	const life = 1500 * time.Millisecond
	fillSem(t, b, "k", 1, 2, time.Minute)
	ghost(t, b, c, "k", life, true)
	end := time.Now().Add(life)
	if _, err := b.Acquire(t.Context(), "k", semOpts("newcomer", 2, time.Minute)); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("a newcomer's Acquire of the one free slot with a frozen waiter queued = %v, want ErrHeld: no jumping the queue", err)
	}
	o := semOpts("waiter", 2, time.Second)
	o.Wait = true
	l, err := b.Acquire(t.Context(), "k", o)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(t.Context())
	if early := time.Until(end); early > 5*time.Millisecond {
		t.Errorf("the waiter behind a frozen one got the slot %v before the frozen one's entry ended", early)
	}
	if late := time.Since(end); late > o.TTL+500*time.Millisecond {
		t.Errorf("the waiter behind a frozen one got the slot %v after its entry ended; it tries once a TTL", late)
	}
}

// A waiter whose ctx ends leaves the queue at once, and a semaphore whose
// holders and waiters are all gone leaves no key behind but its counter.
func TestSemWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	srv := redistest.Start(t)
	b, c := open(t, srv.URL()), srv.Client(t)
	held := fillSem(t, b, "k", 2, 2, time.Minute)
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := semQueued(t, open(t, srv.URL()), c, ctx, "k", "quitter", 2)
	cancel()
	if l := <-gaveUp; l != nil {
		t.Fatalf("a cancelled waiter got a lease")
	}
	n := b.names("k")
	if got := c.ZCard(t.Context(), n.sem[3]).Val(); got != 0 {
		t.Errorf("%d waiters queued after the only one gave up", got)
	}
	for _, l := range held {
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range n.sem {
		if c.Exists(t.Context(), k).Val() != 0 {
			t.Errorf("%s is left behind by a semaphore nobody holds or awaits", k)
		}
	}
}

// Every part of a semaphore expires: holders and waiters that all die
// leave nothing behind for ever.
func TestSemKeysExpire(t *testing.T) {
	srv := redistest.Start(t)
	b, c := open(t, srv.URL()), srv.Client(t)
	fillSem(t, b, "k", 2, 2, time.Minute)
	semQueued(t, open(t, srv.URL()), c, t.Context(), "k", "waiter", 2)
	for _, k := range b.names("k").sem {
		if pttl := c.PTTL(t.Context(), k).Val(); pttl <= 0 {
			t.Errorf("%s has PTTL %v; every part of a semaphore must expire", k, pttl)
		}
	}
}

// Each hand-off of a semaphore slot costs the release and one acquire,
// whatever the number of waiters, as the plain lock's does.
func TestSemHandOffCostsOneReleaseAndOneAcquire(t *testing.T) {
	const n = 4
	srv := redistest.Start(t)
	b, c := open(t, srv.URL()), srv.Client(t)
	held := fillSem(t, b, "k", 2, 2, time.Minute)
	warm := fillSem(t, b, "warm", 1, 2, time.Minute)[0]
	warm.Release(t.Context()) // the server learns the release script: no NOSCRIPT below
	var waiters []<-chan backend.Lease
	for i := range n {
		waiters = append(waiters, semQueued(t, open(t, srv.URL()), c, t.Context(), "k", fmt.Sprint("w", i), 2))
	}
	before := scriptCalls(t, c)
	if err := held[0].Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, w := range waiters {
		select {
		case l := <-w:
			if err := l.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d was not woken", i)
		}
	}
	if calls := scriptCalls(t, c) - before; calls != 2*n+1 {
		t.Errorf("%d hand-offs ran %d scripts, want %d", n, calls, 2*n+1)
	}
	held[1].Release(t.Context())
}

// A plain grant and a semaphore's racing for a free key: one kind wins,
// the other is refused with a *LimitError, never both granted.
func TestSemLimitMismatchRacingAGrant(t *testing.T) {
	srv := redistest.Start(t)
	b, other := open(t, srv.URL()), open(t, srv.URL())
	for round := range 20 {
		key := fmt.Sprint("k", round)
		var wg sync.WaitGroup
		var plain, sem backend.Lease
		var perr, serr error
		wg.Go(func() { plain, perr = b.Acquire(t.Context(), key, opts("plain", time.Minute)) })
		wg.Go(func() { sem, serr = other.Acquire(t.Context(), key, semOpts("sem", 3, time.Minute)) })
		wg.Wait()
		var le *backend.LimitError
		switch {
		case perr == nil && serr == nil:
			t.Fatalf("round %d: a plain lock and a semaphore were both granted", round)
		case perr == nil && !(errors.As(serr, &le) && le.Have == 1 && le.Want == 3):
			t.Errorf("round %d: the semaphore's Acquire beside a plain holder = %v, want a LimitError (have 1, want 3)", round, serr)
		case serr == nil && !(errors.As(perr, &le) && le.Have == 3 && le.Want == 1):
			t.Errorf("round %d: the plain Acquire beside a semaphore = %v, want a LimitError (have 3, want 1)", round, perr)
		}
		for _, l := range []backend.Lease{plain, sem} {
			if l != nil {
				l.Release(t.Context())
			}
		}
	}
}

// A plain lock as an older lockrun wrote it (a value and a record, no
// semaphore keys) excludes a semaphore and reads as before.
func TestSemRefusedByAnOlderPlainLock(t *testing.T) {
	srv := redistest.Start(t)
	b, c := open(t, srv.URL()), srv.Client(t)
	n := b.names("k")
	if err := c.Set(t.Context(), n.lock, "1796000000000000 old-run old-host:1", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := b.Acquire(t.Context(), "k", semOpts("new", 2, time.Minute))
	var le *backend.LimitError
	if !errors.As(err, &le) || le.Have != 1 {
		t.Errorf("a semaphore's Acquire over an older plain lock = %v, want a LimitError (have 1)", err)
	}
	st, err := b.Inspect(t.Context(), "k")
	if err != nil || !st.Held || st.Holder != "old-host:1" || st.Limit != 0 || st.Holders != nil {
		t.Errorf("Inspect of an older plain lock = %+v, %v", st, err)
	}
}

// Tokens of a semaphore keep growing when Redis loses its data, as the
// plain lock's do: they are floored by the server's clock.
func TestSemTokensGrowAcrossDataLoss(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv.URL())
	held := fillSem(t, b, "k", 2, 3, time.Minute)
	last := held[1].Token()
	srv.Restart()
	l := backendtest.MustAcquire(t, b, "k", semOpts("after", 3, time.Minute))
	if l.Token() <= last {
		t.Errorf("token %d after a restart without persistence, not above %d", l.Token(), last)
	}
	for _, h := range held {
		if err := h.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Errorf("Renew of a holder the restart lost = %v, want ErrLost", err)
		}
	}
}

// A semaphore holder's token is not a plain holder's: no checkpoint is
// stored with it.
func TestSemHolderCannotCheckpoint(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv.URL())
	l := fillSem(t, b, "k", 1, 2, time.Minute)[0]
	if err := b.SetCheckpoint(t.Context(), "k", l.Token(), []byte("x")); !errors.Is(err, backend.ErrLost) {
		t.Errorf("SetCheckpoint with a semaphore holder's token = %v, want ErrLost", err)
	}
	if _, ok, err := b.GetCheckpoint(t.Context(), "k"); ok || err != nil {
		t.Errorf("GetCheckpoint after a refused one = %v, %v; want none", ok, err)
	}
}

// A holder's record shows its grant, renewal and info, as a plain one's.
func TestSemHolderRecord(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv.URL())
	o := semOpts("alice", 2, time.Minute)
	o.Info = backend.HolderInfo{User: "ops", Command: "sh -c 'x y'"}
	before := time.Now()
	l := backendtest.MustAcquire(t, b, "k", o)
	st, err := b.Inspect(t.Context(), "k")
	if err != nil || len(st.Holders) != 1 {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
	h := st.Holders[0]
	if h.Info != o.Info || h.Since.Before(before.Add(-20*time.Millisecond)) || h.Renewed != h.Since || h.TTL <= 0 || h.TTL > time.Minute {
		t.Errorf("holder = %+v; want alice's info, since about %v, ttl up to a minute", h, before)
	}
	time.Sleep(10 * time.Millisecond)
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	st, _ = b.Inspect(t.Context(), "k")
	if h2 := st.Holders[0]; !h2.Renewed.After(h.Renewed) || h2.Since != h.Since {
		t.Errorf("after a renewal, since %v renewed %v; was %v %v", h2.Since, h2.Renewed, h.Since, h.Renewed)
	}
}

// A holder's time left never exceeds its lease, even when Inspect runs in
// the grant's own millisecond (the slot's score is one past its end).
func TestSemHolderTTLNeverExceedsTheLease(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv.URL())
	for i := range 20 {
		key := fmt.Sprint("k", i)
		fillSem(t, b, key, 1, 2, time.Minute)
		st, err := b.Inspect(t.Context(), key)
		if err != nil || len(st.Holders) != 1 {
			t.Fatalf("Inspect = %+v, %v", st, err)
		}
		if ttl := st.Holders[0].TTL; ttl <= 0 || ttl > time.Minute {
			t.Fatalf("key %s: holder's TTL %v just after a grant of a minute; want (0, 1m]", key, ttl)
		}
	}
}
