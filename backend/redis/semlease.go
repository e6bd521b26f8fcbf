package redis

import (
	"context"

	"github.com/lockrun/lockrun/backend"
)

// semLease is one holder's slot of a semaphore, known by its lock value
// in the slots' sorted set: the scripts change that slot only, and only
// while it holds that value and its lease has not ended. Token, TTL,
// Start and ClockSkew are the plain lease's.
type semLease struct{ *lease }

var _ backend.GiveBacker = (*semLease)(nil)

// Renew extends this holder's lease by its TTL from now, if its slot is
// still its own, and returns an error wrapping backend.ErrLost if not.
func (l *semLease) Renew(ctx context.Context) error {
	n, err := l.b.scripts.semRenew.Run(ctx, l.b.client, l.names.sem, l.value, millis(l.ttl)).Int()
	if err != nil {
		return l.b.unavailable("renew", l.key, err)
	}
	if n != 1 {
		return l.lost()
	}
	return nil
}

// Release frees this holder's slot if it is still its own and wakes the
// waiters that may take it; with a minimum hold not yet over, the slot
// stays this holder's until the grant plus the minimum. It returns an
// error wrapping backend.ErrLost when the slot is no longer its own, and
// when the holder was revoked (its slot is then freed at once).
func (l *semLease) Release(ctx context.Context) error {
	var hold int64
	if l.minHold > 0 {
		hold = millis(l.minHold)
	}
	return l.release(ctx, hold)
}

// GiveBack frees this holder's slot at once, minimum hold or not.
func (l *semLease) GiveBack(ctx context.Context) error { return l.release(ctx, 0) }

func (l *semLease) release(ctx context.Context, hold int64) error {
	n, err := l.b.scripts.semRelease.Run(ctx, l.b.client, l.names.sem, l.value, l.names.wake, hold).Int()
	if err != nil {
		return l.b.unavailable("release", l.key, err)
	}
	return l.released(n)
}
