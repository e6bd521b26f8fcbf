package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// RunSemaphores runs the subtests of AcquireOptions.Limit: up to N holders
// of a key, each with its own lease and token, and never a mix of limits.
// h.Crash and ExpiryResolution are used as in Run and RunOperators.
func RunSemaphores(t *testing.T, h Operators) {
	s := &semSuite{opSuite{suite: suite{h: h.Harness}, o: h}}
	t.Run("AdmitsUpToTheLimit", s.admitsUpToTheLimit)
	t.Run("LimitsNeverMix", s.limitsNeverMix)
	t.Run("WaitersNeverExceedTheLimit", s.waitersNeverExceedTheLimit)
	t.Run("WaitersAreServedInOrder", s.waitersAreServedInOrder)
	t.Run("ReleaseWakesAWaiter", s.releaseWakesAWaiter)
	t.Run("AWaitersLeaseCountsFromItsGrant", s.waitersLeaseCountsFromItsGrant)
	t.Run("CrashedHolderFreesItsSlot", s.crashedHolderFreesItsSlot)
	t.Run("ReleaseHolderBreaksOne", s.releaseHolderBreaksOne)
	t.Run("MinHoldKeepsTheSlot", s.minHoldKeepsTheSlot)
	t.Run("ListShowsEveryHolder", s.listShowsEveryHolder)
	t.Run("InvalidLimit", s.invalidLimit)
}

type semSuite struct{ opSuite }

func (s *semSuite) semOpts(holder string, limit int) backend.AcquireOptions {
	o := s.opts(holder)
	o.Limit = limit
	return o
}

// fill takes key with n holders of limit, each on its own client, and
// checks that their tokens strictly increase.
func (s *semSuite) fill(t *testing.T, key string, n, limit int) []backend.Lease {
	t.Helper()
	return s.fillFor(t, key, n, limit, s.h.TTL)
}

// fillFor is fill with leases of ttl, for holders that a test keeps longer
// than the harness's TTL without renewing them.
func (s *semSuite) fillFor(t *testing.T, key string, n, limit int, ttl time.Duration) []backend.Lease {
	t.Helper()
	var leases []backend.Lease
	for i := range n {
		o := s.semOpts(fmt.Sprint("h", i), limit)
		o.TTL = ttl
		l := MustAcquire(t, s.open(t), key, o)
		if i > 0 && l.Token() <= leases[i-1].Token() {
			t.Fatalf("holder %d got token %d after %d", i, l.Token(), leases[i-1].Token())
		}
		leases = append(leases, l)
	}
	return leases
}

// wantHolders checks that Inspect shows exactly the holders of leases, in
// token order, with the key's limit.
func (s *semSuite) wantHolders(t *testing.T, key string, limit int, leases ...backend.Lease) {
	t.Helper()
	st, err := s.open(t).Inspect(t.Context(), key)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", key, err)
	}
	if len(leases) == 0 {
		if st.Held || len(st.Holders) != 0 {
			t.Fatalf("Inspect(%q) = %+v; want free", key, st)
		}
		return
	}
	if !st.Held || st.Limit != limit || len(st.Holders) != len(leases) {
		t.Fatalf("Inspect(%q) = held %v, limit %d, %d holders; want held, limit %d, %d holders", key, st.Held, st.Limit, len(st.Holders), limit, len(leases))
	}
	for i, l := range leases {
		h := st.Holders[i]
		if h.Token != l.Token() || !h.Held || h.Key != key || h.RunID == "" || h.Holder == "" {
			t.Errorf("holder %d = %+v; want held, key %q, token %d, with holder and run", i, h, key, l.Token())
		}
	}
	if st.Token != st.Holders[0].Token || st.RunID != st.Holders[0].RunID {
		t.Errorf("Status's own fields (token %d, run %s) do not repeat Holders[0] (%d, %s)", st.Token, st.RunID, st.Holders[0].Token, st.Holders[0].RunID)
	}
}

func (s *semSuite) admitsUpToTheLimit(t *testing.T) {
	const limit = 3
	key := Key(t)
	leases := s.fill(t, key, limit, limit)
	s.wantHolders(t, key, limit, leases...)
	_, err := s.open(t).Acquire(t.Context(), key, s.semOpts("late", limit))
	var held *backend.HeldError
	if !errors.As(err, &held) || held.Status.Limit != limit || len(held.Status.Holders) != limit {
		t.Fatalf("Acquire of a full semaphore = %v; want a *HeldError naming its %d holders", err, limit)
	}
	for _, l := range leases {
		if err := l.Renew(t.Context()); err != nil {
			t.Errorf("Renew of holder %d: %v", l.Token(), err)
		}
	}
	release(t, leases[1])
	s.wantHolders(t, key, limit, leases[0], leases[2])
	if err := leases[1].Release(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("second Release of a holder = %v, want ErrLost", err)
	}
	next := MustAcquire(t, s.open(t), key, s.semOpts("next", limit))
	if next.Token() <= leases[2].Token() {
		t.Errorf("token %d after %d", next.Token(), leases[2].Token())
	}
	for _, l := range []backend.Lease{leases[0], leases[2], next} {
		release(t, l)
	}
	st, err := s.open(t).Inspect(t.Context(), key)
	if err != nil || st.Held || st.Limit != 0 || len(st.Holders) != 0 || st.Token < next.Token() {
		t.Errorf("Inspect of a released semaphore = %+v, %v; want free, last token at least %d", st, err, next.Token())
	}
	// A plain lock after the semaphore goes on from its tokens.
	plain := MustAcquire(t, s.open(t), key, s.opts("plain"))
	if plain.Token() <= next.Token() {
		t.Errorf("plain lock's token %d after the semaphore's %d", plain.Token(), next.Token())
	}
	release(t, plain)
}

// limitsNeverMix: while a key is held with one limit, an Acquire with
// another fails at once, waiting or not, with a *LimitError.
func (s *semSuite) limitsNeverMix(t *testing.T) {
	key := Key(t)
	try := func(holding, asked int) {
		t.Helper()
		for _, wait := range []bool{false, true} {
			o := s.semOpts("other", asked)
			o.Wait = wait
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			l, err := s.open(t).Acquire(ctx, key, o)
			cancel()
			var le *backend.LimitError
			if !errors.As(err, &le) || !errors.Is(err, backend.ErrConfig) || le.Have != max(holding, 1) || le.Want != max(asked, 1) {
				t.Errorf("held with limit %d, Acquire (wait %v) with %d = %v; want a *LimitError (have %d, want %d)", holding, wait, asked, err, max(holding, 1), max(asked, 1))
			}
			// A clash of limits is a mistake, never an outage: an error
			// that is also ErrUnavailable reads "backend unavailable" and
			// is one that retries and --fail-open may treat as such.
			if errors.Is(err, backend.ErrUnavailable) {
				t.Errorf("held with limit %d, Acquire (wait %v) with %d = %v; it is ErrUnavailable too", holding, wait, asked, err)
			}
			if err == nil {
				release(t, l)
			}
		}
	}
	plain := MustAcquire(t, s.open(t), key, s.opts("plain"))
	try(0, 2)
	release(t, plain)
	sem := s.fill(t, key, 1, 2)
	try(2, 1)
	try(2, 3)
	release(t, sem[0])
	again := MustAcquire(t, s.open(t), key, s.semOpts("again", 3))
	if again.Token() <= sem[0].Token() {
		t.Errorf("token %d after %d", again.Token(), sem[0].Token())
	}
	release(t, again)
}

func (s *semSuite) waitersNeverExceedTheLimit(t *testing.T) {
	const limit, n = 3, 12
	key := Key(t)
	var inside, peak atomic.Int32
	var mu sync.Mutex
	seen := map[backend.Token]bool{}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		c := s.open(t)
		wg.Go(func() {
			o := s.semOpts(fmt.Sprint("w", i), limit)
			o.Wait = true
			l, err := c.Acquire(ctx, key, o)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			now := inside.Add(1)
			if now > limit {
				t.Errorf("%d holders inside a semaphore of limit %d", now, limit)
			}
			for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
			}
			mu.Lock()
			if seen[l.Token()] {
				t.Errorf("token %d issued twice", l.Token())
			}
			seen[l.Token()] = true
			mu.Unlock()
			// Stay until another holder is inside too (or 2 s): on a slow
			// host, waiters that each left after a fixed hold could come
			// one by one and never share, whatever the semaphore does.
			for deadline := time.Now().Add(2 * time.Second); peak.Load() < 2 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(30 * time.Millisecond)
			inside.Add(-1)
			if err := l.Release(context.Background()); err != nil {
				t.Errorf("waiter %d release: %v", i, err)
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d of %d waiters got a slot", len(seen), n)
	}
	if peak.Load() < 2 {
		t.Errorf("at most %d holder inside at once: the semaphore let nobody share", peak.Load())
	}
}

// waitersAreServedInOrder: each freed slot goes to the waiter that has
// waited longest.
func (s *semSuite) waitersAreServedInOrder(t *testing.T) {
	const limit = 2
	key := Key(t)
	// The holders outlive the waiters' queueing (900ms) unrenewed: a
	// slot that expired instead of being released would prove nothing.
	held := s.fillFor(t, key, limit, limit, 10*s.h.TTL+3*time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	got := make(chan int, 3)
	leases := make([]backend.Lease, 3)
	for i := range 3 {
		c := s.open(t)
		go func() {
			o := s.semOpts(fmt.Sprint("w", i), limit)
			o.Wait = true
			l, err := c.Acquire(ctx, key, o)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				got <- -1
				return
			}
			leases[i] = l
			got <- i
		}()
		time.Sleep(time.Second) // queued before the next one asks
	}
	for i, l := range held {
		release(t, l)
		select {
		case w := <-got:
			if w != i {
				t.Fatalf("slot %d freed went to waiter %d; waiter %d had waited longest", i, w, i)
			}
		case <-time.After(s.h.TTL / 2):
			t.Fatalf("no waiter got the slot %v after a holder released", s.h.TTL/2)
		}
	}
	release(t, leases[0])
	if w := <-got; w != 2 {
		t.Fatalf("last slot went to waiter %d, want 2", w)
	}
	release(t, leases[1])
	release(t, leases[2])
}

func (s *semSuite) releaseWakesAWaiter(t *testing.T) {
	const limit = 2
	key := Key(t)
	held := s.fill(t, key, limit, limit)
	o := s.semOpts("waiter", limit)
	o.Wait = true
	done := make(chan time.Time, 1)
	var w backend.Lease
	go func() {
		var err error
		if w, err = s.open(t).Acquire(t.Context(), key, o); err != nil {
			t.Errorf("waiter: %v", err)
		}
		done <- time.Now()
	}()
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	release(t, held[1]) // not the oldest: a waiter watching only that one would sleep on
	select {
	case at := <-done:
		if d := at.Sub(released); d > s.h.TTL/2 {
			t.Errorf("the waiter got the slot %v after the release; a hand-off should not wait for expiry", d)
		}
	case <-time.After(s.h.TTL + 5*time.Second):
		t.Fatal("waiter never got the freed slot")
	}
	if w != nil {
		release(t, w)
	}
	release(t, held[0])
}

// waitersLeaseCountsFromItsGrant: a waiter that waited longer than its TTL
// gets a lease whose Start is about its grant, not the start of its wait;
// a lease already over when granted is one lockrun must refuse as too
// late, and the waiter would lose its turn.
func (s *semSuite) waitersLeaseCountsFromItsGrant(t *testing.T) {
	const limit = 2
	key := Key(t)
	held := s.fillFor(t, key, limit, limit, 10*s.h.TTL+3*time.Second)
	o := s.semOpts("waiter", limit)
	o.Wait = true
	type grant struct {
		l  backend.Lease
		at time.Time
	}
	got := make(chan grant, 1)
	go func() {
		l, err := s.open(t).Acquire(t.Context(), key, o)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- grant{l, time.Now()}
	}()
	time.Sleep(s.h.TTL * 3 / 2)
	release(t, held[0])
	g := <-got
	if g.l == nil {
		return
	}
	if age := g.at.Sub(g.l.Start()); age >= s.h.TTL {
		t.Errorf("a waiter's lease was %v old when granted (TTL %v): its Start is not its grant's", age, s.h.TTL)
	}
	release(t, g.l)
	release(t, held[1])
}

func (s *semSuite) crashedHolderFreesItsSlot(t *testing.T) {
	const limit = 2
	key := Key(t)
	held := s.fill(t, key, limit, limit)
	crashed := time.Now()
	if s.h.Crash != nil {
		s.h.Crash(t, held[0])
	}
	o := s.semOpts("taker", limit)
	o.Wait = true
	ctx, cancel := context.WithTimeout(t.Context(), 2*s.h.TTL+5*time.Second)
	defer cancel()
	stop := make(chan struct{})
	renewed := make(chan error, 1)
	go func() { // the other holder lives on, renewing
		tick := time.NewTicker(s.h.TTL / 4)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				renewed <- nil
				return
			case <-tick.C:
				if err := held[1].Renew(context.Background()); err != nil {
					renewed <- err
					return
				}
			}
		}
	}()
	w, err := s.open(t).Acquire(ctx, key, o)
	close(stop)
	if err != nil {
		t.Fatalf("the slot of a crashed holder was not taken over: %v", err)
	}
	if d := time.Since(crashed); d > s.h.TTL+time.Second+s.o.ExpiryResolution {
		t.Errorf("takeover came %v after the crash; the lease was %v", d, s.h.TTL)
	}
	if err := <-renewed; err != nil {
		t.Errorf("the living holder's Renew failed: %v", err)
	}
	if err := held[0].Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("crashed holder's Renew = %v, want ErrLost", err)
	}
	s.wantHolders(t, key, limit, held[1], w)
	release(t, held[1])
	release(t, w)
}

func (s *semSuite) releaseHolderBreaksOne(t *testing.T) {
	const limit = 3
	key := Key(t)
	admin := s.open(t)
	r, ok := admin.(backend.HolderReleaser)
	if !ok {
		t.Fatalf("%T has no ReleaseHolder method", admin)
	}
	held := s.fill(t, key, limit, limit)
	if err := r.ReleaseHolder(t.Context(), key, held[1].Token()); err != nil {
		t.Fatalf("ReleaseHolder: %v", err)
	}
	WantLost(t, held[1], "the broken holder's Renew")
	for _, l := range []backend.Lease{held[0], held[2]} {
		if err := l.Renew(t.Context()); err != nil {
			t.Errorf("another holder's Renew after ReleaseHolder: %v", err)
		}
	}
	s.wantHolders(t, key, limit, held[0], held[2])
	if err := r.ReleaseHolder(t.Context(), key, held[1].Token()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("ReleaseHolder of a token no longer held = %v, want ErrLost", err)
	}
	_ = held[1].Release(t.Context()) // the broken holder stops, as lockrun would
	next := MustAcquire(t, s.open(t), key, s.semOpts("next", limit))
	if next.Token() <= held[2].Token() {
		t.Errorf("token %d after %d", next.Token(), held[2].Token())
	}
	if err := admin.ForceRelease(t.Context(), key); err != nil {
		t.Fatalf("ForceRelease: %v", err)
	}
	for _, l := range []backend.Lease{held[0], held[2], next} {
		WantLost(t, l, "Renew after ForceRelease of the semaphore")
		_ = l.Release(t.Context()) // the broken holders stop, as lockrun would
	}
	s.wantHolders(t, key, limit)
	// On a plain lock, ReleaseHolder breaks the holder it names only.
	plain := s.mustAcquire(t, s.open(t), key, "plain")
	if err := r.ReleaseHolder(t.Context(), key, plain.Token()-1); !errors.Is(err, backend.ErrLost) {
		t.Errorf("ReleaseHolder of another token on a plain lock = %v, want ErrLost", err)
	}
	if err := plain.Renew(t.Context()); err != nil {
		t.Errorf("the plain holder's Renew after a ReleaseHolder of another token: %v", err)
	}
	if err := r.ReleaseHolder(t.Context(), key, plain.Token()); err != nil {
		t.Errorf("ReleaseHolder of the plain holder: %v", err)
	}
	WantLost(t, plain, "the plain holder's Renew after its ReleaseHolder")
}

// minHoldKeepsTheSlot: a holder released within its minimum hold keeps its
// slot, not the others', until the minimum ends.
func (s *semSuite) minHoldKeepsTheSlot(t *testing.T) {
	const limit = 2
	key := Key(t)
	o := s.semOpts("cron", limit)
	o.MinHold = minHold
	kept := MustAcquire(t, s.open(t), key, o)
	end := kept.Start().Add(minHold)
	other := MustAcquire(t, s.open(t), key, s.semOpts("other", limit))
	release(t, kept)
	release(t, other)
	s.wantHolders(t, key, limit, kept)
	third := MustAcquire(t, s.open(t), key, s.semOpts("third", limit))
	if _, err := s.open(t).Acquire(t.Context(), key, s.semOpts("fourth", limit)); !errors.Is(err, backend.ErrHeld) && time.Until(end) > 100*time.Millisecond {
		t.Errorf("Acquire of a semaphore full of a minimum hold and a holder = %v, want ErrHeld", err)
	}
	release(t, third)
	w := s.semOpts("after", limit)
	w.Wait = true
	ctx, cancel := context.WithTimeout(t.Context(), minHold+s.o.ExpiryResolution+5*time.Second)
	defer cancel()
	ao := s.semOpts("a", limit)
	ao.TTL = 3 * minHold // a lives, unrenewed, past the kept slot's minimum
	a := MustAcquire(t, s.open(t), key, ao)
	b, err := s.open(t).Acquire(ctx, key, w) // the kept slot, once its minimum ends
	if err != nil {
		t.Fatalf("waiter for the kept slot: %v", err)
	}
	if early := time.Until(end); early > 0 {
		t.Errorf("the kept slot was taken %v before its minimum hold ended", early)
	}
	release(t, a)
	release(t, b)
}

func (s *semSuite) listShowsEveryHolder(t *testing.T) {
	const limit = 2
	key := Key(t)
	l, ok := s.open(t).(Lister)
	if !ok {
		t.Fatal("the backend has no List method")
	}
	held := s.fill(t, key, limit, limit)
	all, err := l.List(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	var found *backend.Status
	for i := range all {
		if all[i].Key == key {
			found = &all[i]
		}
	}
	if found == nil || found.Limit != limit || len(found.Holders) != limit || found.Holders[0].Token != held[0].Token() || found.Holders[1].Token != held[1].Token() {
		t.Errorf("List(%q) = %+v; want one entry with both holders", key, all)
	}
	release(t, held[0])
	release(t, held[1])
}

func (s *semSuite) invalidLimit(t *testing.T) {
	b, key := s.open(t), Key(t)
	for _, limit := range []int{-1, backend.MaxLimit + 1} {
		if _, err := b.Acquire(t.Context(), key, s.semOpts("x", limit)); !errors.Is(err, backend.ErrInvalidOptions) {
			t.Errorf("Acquire with limit %d = %v, want ErrInvalidOptions", limit, err)
		}
	}
}
