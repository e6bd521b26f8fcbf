package backendtest

import (
	"context"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// tokenAhead is how far above the clock a token may be: tokens are on the
// scale of the wall clock in microseconds, and a grant adds one to the
// last token only when the clock has not moved past it.
const tokenAhead = time.Second

// tokensFollowTheClock checks the one scale every backend's tokens are on:
// each is at least the wall clock in microseconds when Acquire was called
// (so a key moved from any backend to any other never gets a lower token)
// and not far above the clock once it returned. The sleeps let the clock
// run ahead of a counter that would only count grants.
func (s *suite) tokensFollowTheClock(t *testing.T) {
	a, b, key := s.open(t), s.open(t), Key(t)
	for range 3 {
		before := time.Now()
		l := s.mustAcquire(t, a, key, "alice")
		checkClockToken(t, "grant", before, l)
		time.Sleep(5 * time.Millisecond)
		release(t, l)
	}
	l := s.mustAcquire(t, a, key, "alice")
	got := make(chan backend.Lease, 1)
	before := time.Now()
	go func() {
		o := s.opts("bob")
		o.Wait = true
		w, err := b.Acquire(t.Context(), key, o)
		if err != nil {
			t.Errorf("waiting Acquire: %v", err)
		}
		got <- w
	}()
	time.Sleep(20 * time.Millisecond)
	release(t, l)
	select {
	case w := <-got:
		if w != nil {
			checkClockToken(t, "waiter's grant", before, w)
			release(t, w)
		}
	case <-time.After(s.h.TTL + 5*time.Second):
		t.Fatal("waiter did not wake after the release")
	}
	if err := a.ForceRelease(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	before = time.Now()
	l = s.mustAcquire(t, a, key, "carol")
	checkClockToken(t, "grant after a force-release", before, l)
	release(t, l)
}

// checkClockToken fails t unless l's token is at least the wall clock in
// microseconds at before and at most tokenAhead above it now.
func checkClockToken(t *testing.T, what string, before time.Time, l backend.Lease) {
	t.Helper()
	low := backend.Token(before.UnixMicro())
	high := backend.Token(time.Now().Add(tokenAhead).UnixMicro())
	switch tok := l.Token(); {
	case tok < low:
		t.Errorf("%s: token %d is below the wall clock in µs when it was asked for, %d", what, tok, low)
	case tok > high:
		t.Errorf("%s: token %d is more than %v above the wall clock in µs, %d", what, tok, tokenAhead, high)
	}
}
