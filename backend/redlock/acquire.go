package redlock

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/backend/redis"
)

// expirySlack is how long after a holder's lease should have expired a
// waiter tries again: Redis counts in whole milliseconds.
const expirySlack = 2 * time.Millisecond

// staleRetries bounds the grants tried again with a higher token when a
// master had already recorded one as high (a grant that came and went
// between this acquire's peek and its grant).
const staleRetries = 3

// drift is the margin Redlock keeps for the masters' clocks running faster
// than ours and for Redis's millisecond expiry: 1% of the TTL plus 2 ms.
// Each master is asked for ttl+drift, so that the validity left after the
// margin is still the whole ttl, counted from before the first request.
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// request is one Acquire call.
type request struct {
	key           string
	names         names
	o             backend.AcquireOptions
	px            int64  // ms asked of each master: TTL plus drift, added in ms, where a TTL near the limit cannot overflow
	info          string // the holder's record, JSON
	restartMS     int64  // a master up for less grants nothing new (lua/grant.lua)
	waiter, place string // set while queued
}

// attempt is the outcome of one try: a lease, or who holds the lock.
type attempt struct {
	lease     backend.Lease
	held      backend.Status // its TTL is when a majority can be free
	contended bool           // no one holds a majority: worth trying again soon
}

// Acquire takes the lock on a majority of the masters within the lease's
// validity. With o.Wait it queues on every master until it gets the lock
// or ctx ends, and then returns an error wrapping context.Cause(ctx).
// Fewer than a majority answering wraps backend.ErrUnavailable (or
// backend.ErrPermission when a master refused our credentials), also
// while waiting.
func (b *Backend) Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	if err := backend.ValidateRequest(key, o); err != nil {
		return nil, err
	}
	info, err := json.Marshal(o.Info)
	if err != nil {
		return nil, fmt.Errorf("%w: lock %q: holder info: %w", backend.ErrInvalidOptions, key, err)
	}
	r := &request{key: key, names: b.names(key), o: o, px: millis(o.TTL) + millis(drift(o.TTL)), info: string(info),
		restartMS: redis.RestartMS(b.restartWait, o)}
	if o.EffectiveLimit() > 1 {
		return b.acquireSem(ctx, r)
	}
	a, err := b.tryHard(ctx, r, b.try)
	switch {
	case err != nil:
		return nil, err
	case a.lease != nil:
		return a.lease, nil
	case !o.Wait:
		return nil, &backend.HeldError{Status: a.held}
	}
	return b.wait(ctx, r)
}

// wait queues for the lock until it is granted or ctx ends. It listens
// before it tries, so that a release between a try and the wait that
// follows cannot be missed.
func (b *Backend) wait(ctx context.Context, r *request) (backend.Lease, error) {
	r.waiter, r.place = rand.Text(), fmt.Sprint(time.Now().UnixMicro())
	l, err := b.listen(ctx, r)
	if err != nil {
		return nil, err
	}
	defer l.close()
	for {
		a, err := b.tryHard(ctx, r, b.try)
		if cause := context.Cause(ctx); cause != nil {
			if a.lease != nil {
				b.giveBack(a.lease)
			}
			return nil, fmt.Errorf("waiting for lock %q: %w", r.key, cause)
		}
		if err != nil {
			return nil, err
		}
		if a.lease != nil {
			return a.lease, nil
		}
		if err := l.next(ctx, r.key, a.held.TTL+expirySlack); err != nil {
			return nil, err
		}
	}
}

// contendedTries bounds the tries of one acquire that find the masters
// split between acquirers, none with a majority; each waits a random
// pause first, growing from a millisecond (Redlock's retry), so that the
// racers fall out of step and one of them wins.
const contendedTries = 8

// tryHard tries (with try: a plain lock's or a semaphore's) until the
// lock is granted, held by a majority, or still contended after
// contendedTries.
func (b *Backend) tryHard(ctx context.Context, r *request, try func(context.Context, *request) (attempt, error)) (attempt, error) {
	pause := time.Millisecond
	for i := 1; ; i++ {
		a, err := try(ctx, r)
		if err != nil || !a.contended || i == contendedTries {
			return a, err
		}
		t := time.NewTimer(mrand.N(pause) + pause/2)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return a, nil
		}
		pause *= 2
	}
}

// giveBack releases a lease granted after its caller stopped waiting.
func (b *Backend) giveBack(l backend.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), b.opt.ReadTimeout)
	defer cancel()
	_ = l.Release(ctx)
}

// callTimeout bounds each round of calls of an acquire: a master that
// does not answer within a third of the TTL is skipped, as Redlock asks,
// so that a dead master does not eat the lease's validity.
func (b *Backend) callTimeout(ttl time.Duration) time.Duration {
	return max(min(b.opt.ReadTimeout, ttl/3), 10*time.Millisecond)
}
