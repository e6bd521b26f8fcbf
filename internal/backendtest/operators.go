package backendtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// Lister is the listing method every backend implements (the CLI defines
// the same small interface where it lists).
type Lister interface {
	List(ctx context.Context, prefix string) ([]backend.Status, error)
}

// Operators is what an operator sees and what cron on a fleet relies on:
// holder records, listing and the minimum hold.
type Operators struct {
	Harness
	// RenewedResolution is how exactly the backend reports the last
	// renewal (etcd derives it from the lease's TTL left, in whole
	// seconds); 0 means to within the server's clock reading.
	RenewedResolution time.Duration
	// ExpiryResolution is how late after its end a minimum hold may still
	// show (etcd's leases count in whole seconds and expire on the
	// leader's tick).
	ExpiryResolution time.Duration
}

// RunOperators runs the operator-facing subtests.
func RunOperators(t *testing.T, h Operators) {
	s := &opSuite{suite: suite{h: h.Harness}, o: h}
	t.Run("HolderRecord", s.holderRecord)
	t.Run("WaiterRecordsItsOwnGrant", s.waiterRecordsItsOwnGrant)
	t.Run("List", s.list)
	t.Run("MinHoldOutlivesRelease", s.minHoldOutlivesRelease)
	t.Run("MinHoldOverIsReleasedAtOnce", s.minHoldOverIsReleasedAtOnce)
	t.Run("MinHoldWaiterGetsItAfter", s.minHoldWaiterGetsItAfter)
	t.Run("MinHoldGivenBackIsFreeAtOnce", s.minHoldGivenBack)
}

type opSuite struct {
	suite
	o Operators
}

// info is a holder record with the characters a store must keep as given.
var info = backend.HolderInfo{User: "ops", Command: "sh -c 'echo \"hi\"; x=1' \x1b[31m", CIURL: "https://ci.example/job/42?a=b&c=d"}

// near fails unless got is within [lo-slack, hi+slack].
func near(t *testing.T, what string, got, lo, hi time.Time, slack time.Duration) {
	t.Helper()
	if got.Before(lo.Add(-slack)) || got.After(hi.Add(slack)) {
		t.Errorf("%s = %v, want within [%v, %v] ± %v", what, got.Format(time.StampMicro), lo.Format(time.StampMicro), hi.Format(time.StampMicro), slack)
	}
}

func (s *opSuite) holderRecord(t *testing.T) {
	b, key := s.open(t), Key(t)
	o := s.opts("alice")
	o.Info = info
	before := time.Now()
	l := MustAcquire(t, b, key, o)
	granted := time.Now()
	defer release(t, l)
	st, err := s.open(t).Inspect(t.Context(), key)
	if err != nil || !st.Held || st.Info != info {
		t.Fatalf("Inspect = %+v, %v; want held with info %+v", st, err, info)
	}
	const clock = 20 * time.Millisecond // the server's clock against ours
	near(t, "Since", st.Since, before, granted, clock)
	near(t, "Renewed before any renewal", st.Renewed, before, granted, clock+s.o.RenewedResolution)
	time.Sleep(s.h.TTL / 3)
	sent := time.Now()
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	renewed := time.Now()
	st, err = b.Inspect(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "Since after a renewal", st.Since, before, granted, clock)
	near(t, "Renewed", st.Renewed, sent, renewed, clock+s.o.RenewedResolution)
}

// waiterRecordsItsOwnGrant: a waiter's Since is when it got the lock, not
// when it began to wait (a backend may record it just after the grant).
func (s *opSuite) waiterRecordsItsOwnGrant(t *testing.T) {
	b, key := s.open(t), Key(t)
	first := MustAcquire(t, b, key, s.opts("first"))
	o := s.opts("waiter")
	o.Wait, o.Info = true, info
	got := make(chan backend.Lease, 1)
	go func() {
		l, err := s.open(t).Acquire(t.Context(), key, o)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	time.Sleep(s.h.TTL / 2)
	released := time.Now()
	release(t, first)
	l := <-got
	if l == nil {
		return
	}
	defer release(t, l)
	backend.Started(l) // as the runner does once the command runs
	var st backend.Status
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if st, err = b.Inspect(t.Context(), key); err != nil {
			t.Fatal(err)
		}
		if st.Holder == "waiter" && !st.Since.Before(released.Add(-20*time.Millisecond)) {
			break
		}
	}
	near(t, "the waiter's Since", st.Since, released, time.Now(), 20*time.Millisecond)
	if st.Info != info {
		t.Errorf("the waiter's info = %+v, want %+v", st.Info, info)
	}
}

func (s *opSuite) list(t *testing.T) {
	b := s.open(t)
	lister, ok := b.(Lister)
	if !ok {
		t.Fatalf("%T has no List method", b)
	}
	prefix := Key(t) + "."
	var held []backend.Lease
	for _, name := range []string{"c", "a", "b"} {
		o := s.opts("holder-" + name)
		o.Info = info
		held = append(held, MustAcquire(t, b, prefix+name, o))
	}
	free := MustAcquire(t, b, prefix+"free", s.opts("gone"))
	release(t, free)
	other := MustAcquire(t, b, "other-"+prefix+"a", s.opts("other"))
	defer release(t, other)
	defer func() {
		for _, l := range held {
			release(t, l)
		}
	}()
	got, err := lister.List(t.Context(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i, st := range got {
		keys = append(keys, st.Key)
		if want := "holder-" + st.Key[len(prefix):]; !st.Held || st.Holder != want || st.Info != info || st.Since.IsZero() || st.Token == 0 {
			t.Errorf("List[%d] = %+v; want held by %s with its record", i, st, want)
		}
	}
	if want := []string{prefix + "a", prefix + "b", prefix + "c"}; !slices.Equal(keys, want) {
		t.Errorf("List(%q) keys = %q, want %q (held ones, sorted)", prefix, keys, want)
	}
	all, err := lister.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, st := range all {
		if st.Key == prefix+"a" || st.Key == "other-"+prefix+"a" {
			n++
		}
	}
	if n != 2 || !slices.IsSortedFunc(all, func(a, b backend.Status) int { return strings.Compare(a.Key, b.Key) }) {
		t.Errorf("List(\"\") has %d of the 2 expected keys, or is not sorted: %d entries", n, len(all))
	}
}

// minHold is long enough for etcd's whole-second leases to show it.
const minHold = 3 * time.Second

func (s *opSuite) minHoldOutlivesRelease(t *testing.T) {
	b, key := s.open(t), Key(t)
	o := s.opts("host-a")
	o.MinHold = minHold
	l := MustAcquire(t, b, key, o)
	end := l.Start().Add(minHold)
	time.Sleep(100 * time.Millisecond)
	release(t, l)
	st, err := s.open(t).Inspect(t.Context(), key)
	if err != nil || !st.Held || st.Holder != "host-a" || st.Token != l.Token() || st.RunID != o.RunID {
		t.Fatalf("after an early Release with MinHold, Inspect = %+v, %v; want still held by host-a, token %d", st, err, l.Token())
	}
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Renew after Release = %v, want ErrLost", err)
	}
	// Another host whose cron fired later finds it taken until the end.
	other := s.open(t)
	for time.Until(end) > 100*time.Millisecond {
		_, err := other.Acquire(t.Context(), key, s.opts("host-b"))
		if !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("host-b's Acquire %v before the minimum hold ends = %v, want ErrHeld", time.Until(end), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.takenBy(t, other, key, end.Add(s.o.ExpiryResolution+time.Second), l.Token())
}

// takenBy checks that key can be taken by `by`, with a higher token,
// before deadline.
func (s *opSuite) takenBy(t *testing.T, b backend.Backend, key string, deadline time.Time, after backend.Token) {
	t.Helper()
	for {
		l, err := b.Acquire(t.Context(), key, s.opts("host-b"))
		if err == nil {
			if l.Token() <= after {
				t.Errorf("token %d after %d", l.Token(), after)
			}
			release(t, l)
			return
		}
		if !errors.Is(err, backend.ErrHeld) || time.Now().After(deadline) {
			t.Fatalf("Acquire %v after the minimum hold should have ended: %v", time.Since(deadline), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *opSuite) minHoldOverIsReleasedAtOnce(t *testing.T) {
	b, key := s.open(t), Key(t)
	o := s.opts("host-a")
	o.MinHold = 200 * time.Millisecond
	l := MustAcquire(t, b, key, o)
	time.Sleep(300 * time.Millisecond)
	release(t, l)
	if st, err := b.Inspect(t.Context(), key); err != nil || st.Held {
		t.Errorf("Release after the minimum hold: Inspect = %+v, %v; want free", st, err)
	}
}

func (s *opSuite) minHoldWaiterGetsItAfter(t *testing.T) {
	b, key := s.open(t), Key(t)
	o := s.opts("host-a")
	o.MinHold = minHold
	l := MustAcquire(t, b, key, o)
	end := l.Start().Add(minHold)
	release(t, l)
	w := s.opts("waiter")
	w.Wait = true
	ctx, cancel := context.WithTimeout(t.Context(), minHold+s.o.ExpiryResolution+2*time.Second)
	defer cancel()
	got, err := s.open(t).Acquire(ctx, key, w)
	if err != nil {
		t.Fatalf("waiter: %v", err)
	}
	defer release(t, got)
	if early := time.Until(end); early > 0 {
		t.Errorf("the waiter got the lock %v before the minimum hold ended", early)
	}
	if late := time.Since(end); late > s.o.ExpiryResolution+time.Second {
		t.Errorf("the waiter got the lock %v after the minimum hold ended", late)
	}
}

// minHoldGivenBack: a lease given back (its command never started) keeps
// no minimum hold: the next host takes the lock at once.
func (s *opSuite) minHoldGivenBack(t *testing.T) {
	b, key := s.open(t), Key(t)
	o := s.opts("host-a")
	o.MinHold = time.Minute
	l := MustAcquire(t, b, key, o)
	if _, ok := l.(backend.GiveBacker); !ok {
		t.Fatalf("%T honours MinHold but has no GiveBack method", l)
	}
	if err := backend.GiveBack(t.Context(), l); err != nil {
		t.Fatalf("GiveBack = %v", err)
	}
	if st, err := b.Inspect(t.Context(), key); err != nil || st.Held {
		t.Errorf("after GiveBack within the minimum hold, Inspect = %+v, %v; want free", st, err)
	}
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Renew after GiveBack = %v, want ErrLost", err)
	}
	next, err := s.open(t).Acquire(t.Context(), key, s.opts("host-b"))
	if err != nil {
		t.Fatalf("host-b's Acquire right after a GiveBack = %v, want the lock", err)
	}
	defer release(t, next)
	if next.Token() <= l.Token() {
		t.Errorf("token %d after %d", next.Token(), l.Token())
	}
}
