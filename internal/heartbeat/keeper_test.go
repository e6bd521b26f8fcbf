package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/clock"
)

// step is how one fake renewal behaves: it answers err after delay, or
// blocks until its context ends when hang is set.
type step struct {
	delay time.Duration
	err   error
	hang  bool
}

// fakeLease plays a script of renewals; after the script it succeeds at once.
type fakeLease struct {
	mu     sync.Mutex
	script []step
	calls  []time.Time // when each renewal was sent
	ctxErr []error     // how each hanging renewal ended
}

func (f *fakeLease) Renew(ctx context.Context) error {
	f.mu.Lock()
	f.calls = append(f.calls, time.Now())
	var s step
	if len(f.script) > 0 {
		s, f.script = f.script[0], f.script[1:]
	}
	f.mu.Unlock()
	if s.hang {
		<-ctx.Done()
		f.mu.Lock()
		f.ctxErr = append(f.ctxErr, ctx.Err())
		f.mu.Unlock()
		return ctx.Err()
	}
	select {
	case <-time.After(s.delay):
		return s.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fakeLease) sent() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls...)
}

func testPolicy(t *testing.T) Policy {
	t.Helper()
	p, err := NewPolicy(3*time.Second, WithInterval(time.Second), WithGrace(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// lostAt waits for the loss and returns when it happened.
func lostAt(t *testing.T, k *Keeper, within time.Duration) time.Time {
	t.Helper()
	select {
	case <-k.Lost():
		return time.Now()
	case <-time.After(within):
		t.Fatalf("lease not reported lost within %v", within)
		return time.Time{}
	}
}

func TestRenewsOnScheduleAndNeverLoses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testPolicy(t)
		lease := &fakeLease{}
		start := time.Now()
		var extends []time.Time
		k := Start(t.Context(), lease, p, start, OnExtend(func(at time.Time) { extends = append(extends, at) }), WithClock(clock.Runtime))
		time.Sleep(10*time.Second + time.Millisecond)
		select {
		case <-k.Lost():
			t.Fatalf("lost a lease whose renewals all succeed: %v", k.Err())
		default:
		}
		k.Stop()
		sent := lease.sent()
		if len(sent) != 10 {
			t.Fatalf("%d renewals in 10s with a 1s heartbeat, want 10", len(sent))
		}
		for i, s := range sent {
			if want := start.Add(time.Duration(i+1) * time.Second); !s.Equal(want) {
				t.Errorf("renewal %d sent at +%v, want +%v", i, s.Sub(start), want.Sub(start))
			}
		}
		if len(extends) != 11 || !extends[10].Equal(p.KillAt(sent[9])) {
			t.Errorf("OnExtend saw %d deadlines ending %v, want 11 ending %v", len(extends), extends[len(extends)-1], p.KillAt(sent[9]))
		}
	})
}

func TestFailingRenewalsLoseAtTheTermDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testPolicy(t)
		boom := errors.New("connection refused")
		lease := &fakeLease{script: repeat(step{err: boom}, 100)}
		start := time.Now()
		k := Start(t.Context(), lease, p, start, WithClock(clock.Runtime))
		at := lostAt(t, k, p.TTL)
		if !at.Equal(p.TermAt(start)) {
			t.Errorf("lost at +%v, want the term deadline +%v", at.Sub(start), p.TermAt(start).Sub(start))
		}
		if !k.KillBy().Equal(p.KillAt(start)) {
			t.Errorf("kill by +%v, want +%v", k.KillBy().Sub(start), p.KillAt(start).Sub(start))
		}
		if err := k.Err(); !errors.Is(err, backend.ErrLost) || !strings.Contains(err.Error(), boom.Error()) {
			t.Errorf("Err() = %v, want ErrLost naming the last failure", err)
		}
		if n := len(lease.sent()); n < 3 {
			t.Errorf("%d renewal attempts before giving up, want retries", n)
		}
		k.Stop()
	})
}

func TestHangingRenewalCannotHoldThePastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testPolicy(t)
		lease := &fakeLease{script: []step{{hang: true}}}
		start := time.Now()
		k := Start(t.Context(), lease, p, start, WithClock(clock.Runtime))
		at := lostAt(t, k, p.TTL)
		if !at.Equal(p.TermAt(start)) {
			t.Errorf("lost at +%v, want +%v", at.Sub(start), p.TermAt(start).Sub(start))
		}
		k.Stop()
		if len(lease.ctxErr) != 1 || lease.ctxErr[0] == nil {
			t.Errorf("hanging renewal's context was not ended: %v", lease.ctxErr)
		}
	})
}

func TestLateSuccessCountsFromTheSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testPolicy(t)
		lease := &fakeLease{script: []step{{delay: 1200 * time.Millisecond}, {hang: true}}}
		start := time.Now()
		k := Start(t.Context(), lease, p, start, WithClock(clock.Runtime))
		time.Sleep(2300 * time.Millisecond) // the first renewal, sent at +1s, answered at +2.2s
		firstSent := start.Add(time.Second)
		if got := k.KillBy(); !got.Equal(p.KillAt(firstSent)) {
			t.Errorf("kill by +%v after a late success, want +%v (from the send time)", got.Sub(start), p.KillAt(firstSent).Sub(start))
		}
		at := lostAt(t, k, p.TTL)
		if !at.Equal(p.TermAt(firstSent)) {
			t.Errorf("lost at +%v, want +%v", at.Sub(start), p.TermAt(firstSent).Sub(start))
		}
		k.Stop()
	})
}

func TestErrLostStartsTheKillAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testPolicy(t)
		lease := &fakeLease{script: []step{{err: fmt.Errorf("key k: %w", backend.ErrLost)}}}
		start := time.Now()
		k := Start(t.Context(), lease, p, start, WithClock(clock.Runtime))
		at := lostAt(t, k, p.TTL)
		if want := start.Add(p.Interval); !at.Equal(want) {
			t.Errorf("lost at +%v, want at the first renewal +%v", at.Sub(start), want.Sub(start))
		}
		if want := at.Add(p.Grace); !k.KillBy().Equal(want) {
			t.Errorf("kill by +%v, want grace after the loss +%v", k.KillBy().Sub(start), want.Sub(start))
		}
		if !errors.Is(k.Err(), backend.ErrLost) {
			t.Errorf("Err() = %v, want ErrLost", k.Err())
		}
		if n := len(lease.sent()); n != 1 {
			t.Errorf("%d renewals, want none after ErrLost", n)
		}
		k.Stop()
	})
}

func TestErrLostNearTheDeadlineKeepsTheKillDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testPolicy(t)
		// Failures until just before the term deadline, then proof of loss:
		// the grace must not push the kill past the deadline.
		lease := &fakeLease{script: append(repeat(step{err: errors.New("timeout")}, 5), step{err: backend.ErrLost})}
		start := time.Now()
		k := Start(t.Context(), lease, p, start, WithClock(clock.Runtime))
		lostAt(t, k, p.TTL)
		if k.KillBy().After(p.KillAt(start)) {
			t.Errorf("kill by +%v is after the kill deadline +%v", k.KillBy().Sub(start), p.KillAt(start).Sub(start))
		}
		k.Stop()
	})
}

func TestStaleAcquisitionIsLostAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testPolicy(t)
		start := time.Now().Add(-p.TTL) // the acquire reply took longer than the TTL
		k := Start(t.Context(), &fakeLease{}, p, start, WithClock(clock.Runtime))
		at := lostAt(t, k, time.Second)
		if !at.Equal(time.Now()) || k.KillBy().After(time.Now()) {
			t.Errorf("stale lease: lost at %v, kill by %v; want both now", at, k.KillBy())
		}
		k.Stop()
	})
}

func TestStopInterruptsARenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lease := &fakeLease{script: []step{{hang: true}}}
		k := Start(t.Context(), lease, testPolicy(t), time.Now(), WithClock(clock.Runtime))
		time.Sleep(1100 * time.Millisecond)
		k.Stop()
		k.Stop()
		if len(lease.ctxErr) != 1 {
			t.Errorf("renewal in flight was not cancelled by Stop")
		}
		select {
		case <-k.Lost():
			t.Error("Stop reported a loss")
		default:
		}
	})
}

// stubbornLease's renewals ignore their context until unblocked.
type stubbornLease struct{ unblock chan struct{} }

func (s stubbornLease) Renew(context.Context) error { <-s.unblock; return nil }

func TestStopWaitsForAStubbornRenewalASecondAtMost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lease := stubbornLease{make(chan struct{})}
		defer close(lease.unblock)
		p := testPolicy(t)
		k := Start(t.Context(), lease, p, time.Now(), WithClock(clock.Runtime))
		time.Sleep(p.Interval + time.Millisecond) // the first renewal is in flight
		begin := time.Now()
		k.Stop()
		if took := time.Since(begin); took != stopWait {
			t.Errorf("Stop returned after %v with a renewal stuck; want %v", took, stopWait)
		}
	})
}

func repeat(s step, n int) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestNothingRenewsOnceStopHasReturned: Stop no longer waits for the
// keeper's goroutine, yet once it returns no renewal starts and OnExtend
// is not called, whether it came between renewals or at a renewal's due
// time.
func TestNothingRenewsOnceStopHasReturned(t *testing.T) {
	for _, at := range []time.Duration{1500 * time.Millisecond, 2 * time.Second} {
		synctest.Test(t, func(t *testing.T) {
			lease := &fakeLease{}
			var mu sync.Mutex
			extends := 0
			p := testPolicy(t)
			k := Start(t.Context(), lease, p, time.Now(), WithClock(clock.Runtime), OnExtend(func(time.Time) {
				mu.Lock()
				extends++
				mu.Unlock()
			}))
			time.Sleep(at)
			k.Stop()
			mu.Lock()
			calls, seen := len(lease.sent()), extends
			mu.Unlock()
			time.Sleep(5 * p.Interval)
			mu.Lock()
			defer mu.Unlock()
			if got := len(lease.sent()); got != calls || extends != seen {
				t.Errorf("stopped at +%v: %d renewals and %d deadlines by Stop's return, %d and %d after", at, calls, seen, got, extends)
			}
		})
	}
}
