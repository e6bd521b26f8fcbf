package redlock

import (
	"context"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// semLease is one holder's slot of a semaphore: its value at slot index
// on a majority of the masters. Token, TTL and Start are the plain
// lease's; the scripts change a master's slot only while it holds this
// lease's value and its lease there has not ended.
type semLease struct {
	*lease
	index int
}

var _ backend.GiveBacker = (*semLease)(nil)

// Renew extends the slot by its TTL on every master that still holds it;
// it succeeds when a majority did, and its errors are the plain lease's.
func (l *semLease) Renew(ctx context.Context) error {
	keys := append(append([]string(nil), l.names.sem...), l.names.slotOf)
	rs := fanout(ctx, l.b.masters, func(ctx context.Context, m *master) (int64, error) {
		return l.b.scripts.semRenew.Run(ctx, m.client, keys, l.value, l.px).Int64()
	}, func(rs []reply[int64]) bool { return l.b.settled(tally(rs, ours)) })
	return l.outcome("renew", rs)
}

// Release gives the slot up on every master that holds it and wakes the
// waiters that may take it; with a minimum hold it leaves the slot to end
// at the grant plus MinHold instead. Its errors are Renew's; a revoked
// holder's slot is freed at once and its error wraps ErrLost.
func (l *semLease) Release(ctx context.Context) error {
	var keep int64
	if left := l.minHold - time.Since(l.granted); left > 0 {
		keep = millis(left)
	}
	return l.release(ctx, keep)
}

// GiveBack gives the slot up at once, minimum hold or not.
func (l *semLease) GiveBack(ctx context.Context) error { return l.release(ctx, 0) }

func (l *semLease) release(ctx context.Context, keep int64) error {
	rs := l.b.semReleaseOn(ctx, l.b.masters, l.names, l.value, keep, l.ttl, l.landed, func(rs []reply[int64]) bool {
		return l.b.settled(tally(rs, freed))
	})
	return l.releaseOutcome(rs)
}

// semReleaseOn runs sem_release.lua for value on the masters ms, as
// releaseOn does release.lua.
func (b *Backend) semReleaseOn(ctx context.Context, ms []*master, n names, value string, keep int64, ttl time.Duration, landed map[*master]chan struct{}, decided func([]reply[int64]) bool) []reply[int64] {
	keys := append(append([]string(nil), n.sem...), n.slotOf)
	return b.releaseWith(ctx, ms, ttl, landed, decided, func(ctx context.Context, m *master) (int64, error) {
		return b.scripts.semRelease.Run(ctx, m.client, keys, value, n.wake, keep).Int64()
	})
}
