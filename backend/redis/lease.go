package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// lease is one grant of a lock, known by the exact value it wrote: the
// scripts change the lock only while it still holds that value.
type lease struct {
	b     *Backend
	key   string
	names names
	value string
	token backend.Token
	ttl   time.Duration
	start time.Time
	// minHold keeps the lock this lease's until the grant plus minHold,
	// even when released sooner.
	minHold time.Duration

	skew      time.Duration // the server's clock ahead of ours at the grant, at least
	skewKnown bool
}

// Token is the fencing token of this grant.
func (l *lease) Token() backend.Token { return l.token }

// TTL is the lease length asked for, rounded up to whole milliseconds.
func (l *lease) TTL() time.Duration { return l.ttl }

// Start is the local time just before the acquiring request was sent.
func (l *lease) Start() time.Time { return l.start }

// ClockSkew is how far the server's clock was at least ahead of the local
// one (negative: behind) at the grant: the lock expires on the server's
// clock, so a step of that clock moves the expiry.
func (l *lease) ClockSkew() (time.Duration, bool) { return l.skew, l.skewKnown }

// Renew sets the lock's expiry to TTL from now if the lock still holds this
// lease's value, and returns an error wrapping backend.ErrLost if not.
func (l *lease) Renew(ctx context.Context) error {
	n, err := l.b.scripts.renew.Run(ctx, l.b.client, []string{l.names.lock, l.names.meta}, l.value, millis(l.ttl)).Int()
	if err != nil {
		return l.b.unavailable("renew", l.key, err)
	}
	if n != 1 {
		return l.lost()
	}
	return nil
}

// Release deletes the lock if it still holds this lease's value and wakes
// the next waiter; it returns an error wrapping backend.ErrLost if not,
// and also when the lease was revoked (the lock is then deleted at once).
// With a minimum hold not yet over, the lock instead stays this lease's
// until the grant (the server's time, from the holder's record) plus the
// minimum, and then expires on the server.
func (l *lease) Release(ctx context.Context) error {
	var hold int64
	if l.minHold > 0 {
		hold = millis(l.minHold)
	}
	return l.release(ctx, hold)
}

// GiveBack deletes the lock at once, minimum hold or not, if it still
// holds this lease's value, and wakes the next waiter.
func (l *lease) GiveBack(ctx context.Context) error { return l.release(ctx, 0) }

// release runs release.lua with a minimum hold of hold ms (0: none).
func (l *lease) release(ctx context.Context, hold int64) error {
	keys := []string{l.names.lock, l.names.queue, l.names.meta}
	n, err := l.b.scripts.release.Run(ctx, l.b.client, keys, l.value, l.names.wake, hold).Int()
	if err != nil {
		return l.b.unavailable("release", l.key, err)
	}
	return l.released(n)
}

func (l *lease) lost() error {
	return fmt.Errorf("%w: lock %q on redis %s expired or was taken over (token %s)", backend.ErrLost, l.key, l.b.url, l.token)
}
