// Package backendtest is the conformance suite that every lockrun backend
// runs against a real server: exclusion, fencing tokens, ownership checks,
// waiting, expiry and force-release, all through the backend.Backend
// contract.
package backendtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// Harness describes the backend under test.
type Harness struct {
	// Open returns a new client of the shared store, with its own
	// connections, as a separate lockrun process would have. The suite
	// closes it.
	Open func(t *testing.T) backend.Backend
	// Crash makes the store treat the lease's holder as dead, as if the
	// process had been SIGKILLed: the lock must be free within TTL. Nil
	// means the suite only stops renewing and waits the TTL out.
	Crash func(t *testing.T, l backend.Lease)
	// TTL is the lease length the suite asks for: short, since some tests
	// wait it out, but at least the backend's minimum.
	TTL time.Duration
}

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, h Harness) {
	s := &suite{h: h}
	t.Run("AcquireInspectRelease", s.acquireInspectRelease)
	t.Run("HeldReportsTheHolder", s.heldReportsTheHolder)
	t.Run("TokensStrictlyIncrease", s.tokensStrictlyIncrease)
	t.Run("TokensFollowTheClock", s.tokensFollowTheClock)
	t.Run("ExactlyOneWinner", s.exactlyOneWinner)
	t.Run("WaitersTakeTurns", s.waitersTakeTurns)
	t.Run("WaitWakesOnRelease", s.waitWakesOnRelease)
	t.Run("WaitHonorsContext", s.waitHonorsContext)
	t.Run("CrashedHolderIsTakenOver", s.crashedHolderIsTakenOver)
	t.Run("LeaseLastsItsTTL", s.leaseLastsItsTTL)
	t.Run("RenewExtends", s.renewExtends)
	t.Run("RetriedAcquireRestartsTheTTL", s.retriedAcquireRestartsTheTTL)
	t.Run("ForceReleaseRevokes", s.forceReleaseRevokes)
	t.Run("InvalidKey", s.invalidKey)
}

type suite struct {
	h Harness
}

// open returns a client closed at the end of the test.
func (s *suite) open(t *testing.T) backend.Backend {
	t.Helper()
	b := s.h.Open(t)
	t.Cleanup(func() { b.Close() })
	return b
}

// Key returns a key no other test uses.
func Key(t *testing.T) string {
	return fmt.Sprintf("t-%d-%s", time.Now().UnixNano()%1e9, rand.Text()[:8])
}

func (s *suite) opts(holder string) backend.AcquireOptions {
	return backend.AcquireOptions{TTL: s.h.TTL, Holder: holder, RunID: rand.Text()}
}

// MustAcquire takes key on b with o, failing the test if it cannot.
func MustAcquire(t testing.TB, b backend.Backend, key string, o backend.AcquireOptions) backend.Lease {
	t.Helper()
	l, err := b.Acquire(t.Context(), key, o)
	if err != nil {
		t.Fatalf("Acquire(%q) by %s: %v", key, o.Holder, err)
	}
	return l
}

func (s *suite) mustAcquire(t *testing.T, b backend.Backend, key, holder string) backend.Lease {
	t.Helper()
	l := MustAcquire(t, b, key, s.opts(holder))
	if l.TTL() < s.h.TTL {
		t.Fatalf("granted TTL %v is shorter than the %v asked for", l.TTL(), s.h.TTL)
	}
	return l
}

func release(t *testing.T, l backend.Lease) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func (s *suite) acquireInspectRelease(t *testing.T) {
	b, key := s.open(t), Key(t)
	if st, err := b.Inspect(t.Context(), key); err != nil || st.Held || st.Token != 0 {
		t.Fatalf("Inspect of a new key = %+v, %v; want free with token 0", st, err)
	}
	before := time.Now()
	o := s.opts("alice")
	l, err := b.Acquire(t.Context(), key, o)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() == 0 {
		t.Error("token 0 issued; tokens start above 0")
	}
	if l.Start().Before(before) || l.Start().After(time.Now()) {
		t.Errorf("Start() %v is outside the Acquire call", l.Start())
	}
	st, err := s.open(t).Inspect(t.Context(), key)
	if err != nil || !st.Held || st.Holder != "alice" || st.RunID != o.RunID || st.Token != l.Token() {
		t.Errorf("Inspect while held = %+v, %v; want held by alice, run %s, token %d", st, err, o.RunID, l.Token())
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Errorf("Renew of a held lease: %v", err)
	}
	release(t, l)
	st, err = b.Inspect(t.Context(), key)
	if err != nil || st.Held || st.Token < l.Token() {
		t.Errorf("Inspect after release = %+v, %v; want free, token at least %d", st, err, l.Token())
	}
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Renew after Release = %v, want ErrLost", err)
	}
}

func (s *suite) heldReportsTheHolder(t *testing.T) {
	a, b, key := s.open(t), s.open(t), Key(t)
	l := s.mustAcquire(t, a, key, "alice")
	defer release(t, l)
	_, err := b.Acquire(t.Context(), key, s.opts("bob"))
	var held *backend.HeldError
	if !errors.Is(err, backend.ErrHeld) || !errors.As(err, &held) {
		t.Fatalf("second Acquire = %v, want a *HeldError", err)
	}
	if held.Status.Holder != "alice" || held.Status.Token != l.Token() {
		t.Errorf("HeldError names %+v, want alice with token %d", held.Status, l.Token())
	}
}

func (s *suite) tokensStrictlyIncrease(t *testing.T) {
	clients := []backend.Backend{s.open(t), s.open(t)}
	key := Key(t)
	var last backend.Token
	for i := range 20 {
		l := s.mustAcquire(t, clients[i%2], key, fmt.Sprint("h", i))
		if l.Token() <= last {
			t.Fatalf("acquisition %d got token %d after %d", i, l.Token(), last)
		}
		last = l.Token()
		release(t, l)
	}
}

func (s *suite) exactlyOneWinner(t *testing.T) {
	const n = 24
	key := Key(t)
	clients := make([]backend.Backend, n)
	for i := range clients {
		clients[i] = s.open(t)
	}
	for round := range 3 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		leases := make(chan backend.Lease, n)
		errs := make(chan error, n)
		for i, c := range clients {
			wg.Go(func() {
				<-start
				l, err := c.Acquire(t.Context(), key, s.opts(fmt.Sprint("g", i)))
				if err != nil {
					errs <- err
					return
				}
				leases <- l
			})
		}
		close(start)
		wg.Wait()
		close(leases)
		close(errs)
		if len(leases) != 1 {
			t.Fatalf("round %d: %d winners among %d concurrent acquirers, want 1", round, len(leases), n)
		}
		for err := range errs {
			if !errors.Is(err, backend.ErrHeld) {
				t.Fatalf("round %d: a loser got %v, want ErrHeld", round, err)
			}
		}
		release(t, <-leases)
	}
}

// waitersTakeTurns has many waiters hold the lock one after another and
// checks that no two held it at once and that tokens follow the order of
// the grants.
func (s *suite) waitersTakeTurns(t *testing.T) {
	const n = 8
	key := Key(t)
	var inside atomic.Int32
	var mu sync.Mutex
	var tokens []backend.Token
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range n {
		c := s.open(t)
		wg.Go(func() {
			o := s.opts(fmt.Sprint("w", i))
			o.Wait = true
			l, err := c.Acquire(ctx, key, o)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			if inside.Add(1) != 1 {
				t.Errorf("waiter %d holds the lock with another holder inside", i)
			}
			mu.Lock()
			tokens = append(tokens, l.Token())
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			inside.Add(-1)
			if err := l.Release(context.Background()); err != nil {
				t.Errorf("waiter %d release: %v", i, err)
			}
		})
	}
	wg.Wait()
	if len(tokens) != n {
		t.Fatalf("%d of %d waiters got the lock", len(tokens), n)
	}
	for i := 1; i < n; i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens in grant order %v do not strictly increase", tokens)
		}
	}
}

func (s *suite) waitWakesOnRelease(t *testing.T) {
	a, b, key := s.open(t), s.open(t), Key(t)
	l := s.mustAcquire(t, a, key, "alice")
	got := make(chan backend.Lease, 1)
	go func() {
		o := s.opts("bob")
		o.Wait = true
		w, err := b.Acquire(t.Context(), key, o)
		if err != nil {
			t.Errorf("waiting Acquire: %v", err)
		}
		got <- w
	}()
	select {
	case <-got:
		t.Fatal("waiter got the lock while it was held")
	case <-time.After(100 * time.Millisecond):
	}
	released := time.Now()
	release(t, l)
	select {
	case w := <-got:
		if w == nil {
			return
		}
		if d := time.Since(released); d > time.Second {
			t.Errorf("waiter woke %v after the release; it should wake at once", d)
		}
		if w.Token() <= l.Token() {
			t.Errorf("waiter's token %d is not above the releaser's %d", w.Token(), l.Token())
		}
		release(t, w)
	case <-time.After(s.h.TTL + 5*time.Second):
		t.Fatal("waiter did not wake after the release")
	}
}

func (s *suite) waitHonorsContext(t *testing.T) {
	a, b, key := s.open(t), s.open(t), Key(t)
	l := s.mustAcquire(t, a, key, "alice")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	o := s.opts("bob")
	o.Wait = true
	begin := time.Now()
	w, err := b.Acquire(ctx, key, o)
	if err == nil {
		w.Release(context.Background())
		t.Fatal("waiting Acquire got a held lock")
	}
	if d := time.Since(begin); d < 150*time.Millisecond || d > 2*time.Second {
		t.Errorf("waiting Acquire with a 200ms deadline returned after %v", d)
	}
	release(t, l)
	// The abandoned waiter must not keep or take the lock.
	o = s.opts("carol")
	o.Wait = true
	ctx2, cancel2 := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel2()
	c, err := s.open(t).Acquire(ctx2, key, o)
	if err != nil {
		t.Fatalf("lock not free after the holder released and the waiter gave up: %v", err)
	}
	release(t, c)
}

func (s *suite) crashedHolderIsTakenOver(t *testing.T) {
	a, b, key := s.open(t), s.open(t), Key(t)
	l := s.mustAcquire(t, a, key, "alice")
	crashed := time.Now()
	if s.h.Crash != nil {
		s.h.Crash(t, l)
	}
	o := s.opts("bob")
	o.Wait = true
	ctx, cancel := context.WithTimeout(t.Context(), 2*s.h.TTL+5*time.Second)
	defer cancel()
	w, err := b.Acquire(ctx, key, o)
	if err != nil {
		t.Fatalf("lock of a crashed holder not taken over: %v", err)
	}
	if d := time.Since(crashed); d > s.h.TTL+time.Second {
		t.Errorf("takeover came %v after the crash; the lease was %v", d, s.h.TTL)
	}
	if w.Token() <= l.Token() {
		t.Errorf("new holder's token %d is not above the crashed holder's %d", w.Token(), l.Token())
	}
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("crashed holder's Renew = %v, want ErrLost", err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("crashed holder's Release = %v, want ErrLost", err)
	}
	if st, err := b.Inspect(t.Context(), key); err != nil || !st.Held || st.Holder != "bob" {
		t.Errorf("after a stale Release, Inspect = %+v, %v; want still held by bob", st, err)
	}
	release(t, w)
}

// heldUntil checks, by trying to take the lock from another client every
// TTL/20, that key stays held until the local deadline of a lease that
// started at start: Start() + TTL·(1−1%), the heartbeat's model.
func (s *suite) heldUntil(t *testing.T, key string, start time.Time, during func()) {
	t.Helper()
	other := s.open(t)
	deadline := start.Add(s.h.TTL - s.h.TTL/100 - 10*time.Millisecond)
	next := time.Now()
	for time.Now().Before(deadline) {
		if l, err := other.Acquire(t.Context(), key, s.opts("intruder")); err == nil {
			l.Release(context.Background())
			// A grant is known to precede the deadline only if its reply
			// does: one that returns later (a slow reply on a loaded host)
			// may have been granted after the lease expired.
			if left := time.Until(deadline); left > 0 {
				t.Fatalf("another client took the lock %v before the lease's local deadline", left)
			}
			return
		} else if !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("probe: %v", err)
		}
		if during != nil && !time.Now().Before(next) {
			during()
			next = time.Now().Add(s.h.TTL / 3)
		}
		time.Sleep(s.h.TTL / 20)
	}
}

// leaseLastsItsTTL: a lease that is never renewed still excludes others
// until Start()+TTL (less the drift the heartbeat allows for).
func (s *suite) leaseLastsItsTTL(t *testing.T) {
	key := Key(t)
	l := s.mustAcquire(t, s.open(t), key, "alice")
	s.heldUntil(t, key, l.Start(), nil)
	_ = l.Release(context.Background())
}

// renewExtends: renewing every TTL/3 keeps the lock held for three TTLs.
func (s *suite) renewExtends(t *testing.T) {
	key := Key(t)
	l := s.mustAcquire(t, s.open(t), key, "alice")
	var last time.Time
	renew := func() {
		sent := time.Now()
		if err := l.Renew(t.Context()); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		last = sent
	}
	s.heldUntil(t, key, l.Start().Add(2*s.h.TTL), renew)
	// The last renewal came within a heartbeat (TTL/3) and a probe's
	// sleep of the end; a loaded host may add a little to that.
	if last.IsZero() || time.Since(last) > s.h.TTL*3/4 {
		t.Fatalf("renewals stopped early (last %v ago)", time.Since(last))
	}
	release(t, l)
}

// retriedAcquireRestartsTheTTL: the runner retries Acquire with the same
// run id when a reply may have been lost. A backend that hands the lease
// back must restart its TTL, since the new lease's Start() is the retry's;
// refusing the retry (ErrHeld) is also safe.
func (s *suite) retriedAcquireRestartsTheTTL(t *testing.T) {
	b, key := s.open(t), Key(t)
	o := s.opts("alice")
	first, err := b.Acquire(t.Context(), key, o)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(s.h.TTL / 2)
	again, err := b.Acquire(t.Context(), key, o)
	switch {
	case errors.Is(err, backend.ErrHeld):
		_ = first.Release(context.Background())
		return
	case err != nil:
		t.Fatalf("retried Acquire: %v", err)
	}
	if again.Token() < first.Token() {
		t.Errorf("a retry handed out token %d, below the %d of the grant it retries", again.Token(), first.Token())
	}
	s.heldUntil(t, key, again.Start(), nil)
	_ = again.Release(context.Background())
}

func (s *suite) forceReleaseRevokes(t *testing.T) {
	a, admin, key := s.open(t), s.open(t), Key(t)
	l := s.mustAcquire(t, a, key, "alice")
	if err := admin.ForceRelease(t.Context(), key); err != nil {
		t.Fatalf("ForceRelease: %v", err)
	}
	WantLost(t, l, "Renew after ForceRelease")
	_ = l.Release(t.Context()) // the revoked holder stops, as lockrun would
	o := s.opts("bob")
	o.Wait = true
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	w, err := s.open(t).Acquire(ctx, key, o)
	if err != nil {
		t.Fatalf("Acquire after ForceRelease: %v", err)
	}
	if w.Token() <= l.Token() {
		t.Errorf("token after ForceRelease %d is not above %d", w.Token(), l.Token())
	}
	release(t, w)
	if err := admin.ForceRelease(t.Context(), key); err != nil {
		t.Errorf("ForceRelease of a free key: %v", err)
	}
}

func (s *suite) invalidKey(t *testing.T) {
	b := s.open(t)
	for _, key := range []string{"", "../etc/passwd", "a/b", "a b"} {
		if _, err := b.Acquire(t.Context(), key, s.opts("x")); !errors.Is(err, backend.ErrInvalidKey) {
			t.Errorf("Acquire(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := b.Inspect(t.Context(), key); !errors.Is(err, backend.ErrInvalidKey) {
			t.Errorf("Inspect(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	// The run id tells this run's lease from every other: without one,
	// two runs would be one owner.
	key := Key(t)
	for _, o := range []backend.AcquireOptions{{TTL: s.h.TTL, Holder: "x"}, {TTL: s.h.TTL, Holder: "x", RunID: "a b"}, {Holder: "x", RunID: "r"}} {
		if _, err := b.Acquire(t.Context(), key, o); !errors.Is(err, backend.ErrInvalidOptions) {
			t.Errorf("Acquire(%q, %+v) = %v, want ErrInvalidOptions", key, o, err)
		}
	}
}

// WantLost checks that l learns that it lost its lock: its next Renew
// fails with ErrLost, or, for a lease that watches its record (one with a
// Done channel, etcd's), Done closes within 2 s and the Renew after it
// fails so. what names the Renew in the failure.
func WantLost(t *testing.T, l backend.Lease, what string) {
	t.Helper()
	err := l.Renew(t.Context())
	if errors.Is(err, backend.ErrLost) {
		return
	}
	if d, ok := l.(interface{ Done() <-chan struct{} }); ok && err == nil {
		select {
		case <-d.Done():
			if err = l.Renew(t.Context()); errors.Is(err, backend.ErrLost) {
				return
			}
		case <-time.After(2 * time.Second):
			err = errors.New("nil, and Done not closed within 2 s")
		}
	}
	t.Errorf("%s = %v, want ErrLost", what, err)
}
