package heartbeat

import (
	"errors"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/clock"
)

// A suspend longer than the TTL: the keeper's clock (CLOCK_BOOTTIME in
// production) jumps past every deadline while none of Go's timers ran. The
// lease must be lost at once on wake, with the kill deadline already due,
// not renewed as if no time had passed.
func TestSuspendLongerThanTheTTLIsALossOnWake(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	lease := &fakeLease{}
	p := testPolicy(t)
	start := fake.Now()
	k := Start(t.Context(), lease, p, start, WithClock(fake))
	defer k.Stop()
	time.Sleep(20 * time.Millisecond) // the keeper waits for its first renewal
	fake.Advance(2 * p.TTL)
	select {
	case <-k.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("the lease was not lost after a suspend of twice its TTL")
	}
	if !errors.Is(k.Err(), backend.ErrLost) {
		t.Errorf("cause %v does not wrap ErrLost", k.Err())
	}
	if killBy := k.KillBy(); killBy.After(fake.Now()) || !killBy.Equal(p.KillAt(start)) {
		t.Errorf("kill deadline %v after the grant; want %v, already past", killBy.Sub(start), p.KillAt(start).Sub(start))
	}
	if n := len(lease.sent()); n != 0 {
		t.Errorf("%d renewals sent after the suspend; the lease was past its term deadline", n)
	}
}

// Time that passes on the keeper's clock alone moves its renewals: the
// keeper follows the clock it is given, not Go's.
func TestRenewalsFollowTheKeepersClock(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	lease := &fakeLease{}
	p := testPolicy(t)
	k := Start(t.Context(), lease, p, fake.Now(), WithClock(fake))
	defer k.Stop()
	time.Sleep(20 * time.Millisecond)
	if n := len(lease.sent()); n != 0 {
		t.Fatalf("%d renewals before the keeper's clock moved", n)
	}
	fake.Advance(p.Interval)
	for deadline := time.Now().Add(5 * time.Second); len(lease.sent()) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no renewal once the keeper's clock reached the heartbeat")
		}
	}
	if isLost(k) {
		t.Error("a renewal on schedule lost the lease")
	}
}

func isLost(k *Keeper) bool {
	select {
	case <-k.Lost():
		return true
	default:
		return false
	}
}
