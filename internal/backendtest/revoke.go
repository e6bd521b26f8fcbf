package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// RunRevoke runs the subtests of backend.Revoker: a revoked holder's lock
// or slot stays taken until the holder releases or its lease ends, so that
// no waiter starts beside a command that has not heard of the break.
func RunRevoke(t *testing.T, h Operators) {
	s := &semSuite{opSuite{suite: suite{h: h.Harness}, o: h}}
	t.Run("RevokedLockWaitsForItsHolder", s.revokedLockWaitsForItsHolder)
	t.Run("RevokedFrozenHolderKeepsItUntilExpiry", s.revokedFrozenHolderKeepsItUntilExpiry)
	t.Run("RevokedSlotWaitsForItsHolder", s.revokedSlotWaitsForItsHolder)
	t.Run("RevokeOfNoHolder", s.revokeOfNoHolder)
}

func (s *semSuite) revoker(t *testing.T) backend.Revoker {
	t.Helper()
	b := s.open(t)
	r, ok := b.(backend.Revoker)
	if !ok {
		t.Fatalf("%T has no Revoke method", b)
	}
	return r
}

// wantRevoked checks that Inspect shows the holder of token still holding
// key, revoked.
func (s *semSuite) wantRevoked(t *testing.T, key string, token backend.Token) {
	t.Helper()
	st, err := s.open(t).Inspect(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range st.All() {
		if h.Token == token {
			if !h.Revoked {
				t.Errorf("Inspect shows the revoked holder %d as not revoked: %+v", token, h)
			}
			return
		}
	}
	t.Errorf("Inspect = %+v: the revoked holder %d is gone before it released", st, token)
}

// waitFor starts a waiting Acquire of key and returns the channel of its
// lease (nil on error).
func (s *semSuite) waitFor(t *testing.T, key string, o backend.AcquireOptions) <-chan backend.Lease {
	o.Wait = true
	got := make(chan backend.Lease, 1)
	c := s.open(t)
	go func() {
		l, err := c.Acquire(t.Context(), key, o)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	return got
}

func (s *semSuite) revokedLockWaitsForItsHolder(t *testing.T) {
	key := Key(t)
	a := s.mustAcquire(t, s.open(t), key, "alice")
	if err := s.revoker(t).Revoke(t.Context(), key, 0); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	WantLost(t, a, "Renew after Revoke")
	s.wantRevoked(t, key, a.Token())
	if _, err := s.open(t).Acquire(t.Context(), key, s.opts("bob")); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("Acquire of a revoked holder's lock = %v, want ErrHeld until it releases", err)
	}
	got := s.waitFor(t, key, s.opts("carol"))
	select {
	case <-got:
		t.Fatal("a waiter was granted a revoked lock before its holder released")
	case <-time.After(s.h.TTL / 4):
	}
	released := time.Now()
	if err := a.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("the revoked holder's Release = %v, want ErrLost (and the lock freed)", err)
	}
	select {
	case w := <-got:
		if w == nil {
			return
		}
		if d := time.Since(released); d > s.h.TTL/2 {
			t.Errorf("the waiter got the lock %v after the revoked holder released", d)
		}
		if w.Token() <= a.Token() {
			t.Errorf("token %d after %d", w.Token(), a.Token())
		}
		release(t, w)
	case <-time.After(s.h.TTL + 5*time.Second):
		t.Fatal("the waiter never got the lock after the revoked holder released")
	}
}

// revokedFrozenHolderKeepsItUntilExpiry: a revoked holder that never
// releases (its lockrun frozen) keeps the lock until its lease ends: its
// TTL, or on a store whose leases end only with their holder (h.Crash,
// the file backend), the holder's death.
func (s *semSuite) revokedFrozenHolderKeepsItUntilExpiry(t *testing.T) {
	key := Key(t)
	a := s.mustAcquire(t, s.open(t), key, "alice")
	if err := s.revoker(t).Revoke(t.Context(), key, a.Token()); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	s.heldUntil(t, key, a.Start(), nil)
	if s.h.Crash != nil {
		s.h.Crash(t, a)
	}
	o := s.opts("bob")
	o.Wait = true
	ctx, cancel := context.WithTimeout(t.Context(), s.h.TTL+s.o.ExpiryResolution+5*time.Second)
	defer cancel()
	w, err := s.open(t).Acquire(ctx, key, o)
	if err != nil {
		t.Fatalf("the lock of a revoked holder that never released did not come free at its expiry: %v", err)
	}
	if w.Token() <= a.Token() {
		t.Errorf("token %d after %d", w.Token(), a.Token())
	}
	release(t, w)
}

func (s *semSuite) revokedSlotWaitsForItsHolder(t *testing.T) {
	const limit = 2
	key := Key(t)
	held := s.fill(t, key, limit, limit)
	if err := s.revoker(t).Revoke(t.Context(), key, held[0].Token()); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	WantLost(t, held[0], "the revoked holder's Renew")
	if err := held[1].Renew(t.Context()); err != nil {
		t.Errorf("the other holder's Renew after a Revoke of another: %v", err)
	}
	s.wantRevoked(t, key, held[0].Token())
	if _, err := s.open(t).Acquire(t.Context(), key, s.semOpts("late", limit)); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("Acquire of a semaphore full of a holder and a revoked one = %v, want ErrHeld", err)
	}
	got := s.waitFor(t, key, s.semOpts("waiter", limit))
	select {
	case <-got:
		t.Fatal("a waiter was granted a revoked slot before its holder released")
	case <-time.After(s.h.TTL / 4):
	}
	_ = held[0].Release(t.Context())
	select {
	case w := <-got:
		if w != nil {
			release(t, w)
		}
	case <-time.After(s.h.TTL + 5*time.Second):
		t.Fatal("the waiter never got the revoked holder's slot after it released")
	}
	release(t, held[1])
}

func (s *semSuite) revokeOfNoHolder(t *testing.T) {
	key := Key(t)
	r := s.revoker(t)
	if err := r.Revoke(t.Context(), key, 0); err != nil {
		t.Errorf("Revoke of every holder of a free key = %v, want nil", err)
	}
	a := s.mustAcquire(t, s.open(t), key, "alice")
	if err := r.Revoke(t.Context(), key, a.Token()+1); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Revoke of a token nobody holds = %v, want ErrLost", err)
	}
	if err := a.Renew(t.Context()); err != nil {
		t.Errorf("the holder's Renew after a Revoke of another token: %v", err)
	}
	release(t, a)
}
