package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// expirySlack is how long after the holder's lease should have expired a
// waiter tries again: Redis counts in whole milliseconds, and waking a
// little early only costs one more try.
const expirySlack = 2 * time.Millisecond

// request is one Acquire call, ready for acquire.lua.
type request struct {
	key   string
	names names
	o     backend.AcquireOptions
	ttlMS int64
	info  string // o.Info as stored in the holder's record
	// restartMS is how long after the server's start a free lock stays
	// closed, in ms (see restart_left in lua/lib.lua).
	restartMS int64
}

// attempt is the outcome of one run of acquire.lua: a lease, or the holder
// and when to try again.
type attempt struct {
	lease backend.Lease
	held  backend.Status
	retry time.Duration // when the holder's lease can have expired
	place string        // this waiter's place in the queue, kept across tries
}

// Acquire takes the lock on key in one round trip. With o.Wait it queues
// for the lock (see the package comment) until it gets it or ctx ends, and
// then returns an error wrapping context.Cause(ctx). Network and server
// errors wrap backend.ErrUnavailable, also while waiting.
func (b *Backend) Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	if err := backend.ValidateRequest(key, o); err != nil {
		return nil, err
	}
	r := request{key: key, names: b.names(key), o: o, ttlMS: millis(o.TTL), info: encodeInfo(o.Info), restartMS: b.restartMS(o)}
	if o.EffectiveLimit() > 1 {
		return b.acquireSem(ctx, r)
	}
	// The first try does not queue: a free lock costs one round trip.
	a, err := b.try(ctx, r, "", "")
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
// follows it cannot be missed.
func (b *Backend) wait(ctx context.Context, r request) (backend.Lease, error) {
	l, err := b.listen(ctx, r)
	if err != nil {
		return nil, err
	}
	defer l.close()
	place := ""
	for {
		a, err := b.try(ctx, r, l.id, place)
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
		place = a.place
		if err := l.next(ctx, r.key, a.retry+expirySlack); err != nil {
			return nil, err
		}
	}
}

// try runs acquire.lua once; a non-empty waiter is queued when the lock is
// held.
func (b *Backend) try(ctx context.Context, r request, waiter, place string) (attempt, error) {
	keys := r.names.with(r.names.lock, r.names.counter, r.names.queue, r.names.meta)
	start := time.Now() // before the request: the server's TTL starts later
	res, err := b.scripts.acquire.Run(ctx, b.client, keys, r.ttlMS, r.o.RunID, r.o.Holder, waiter, place, r.info, r.names.wake, r.restartMS).Slice()
	if err != nil {
		return attempt{}, b.acquireFailed(r.key, err)
	}
	a, err := b.parseAttempt(r, res, start, time.Now())
	if err != nil && !errors.Is(err, backend.ErrLimitMismatch) {
		err = b.unavailable("acquire", r.key, err)
	}
	if err != nil {
		return attempt{}, err
	}
	return a, nil
}

// parseAttempt reads acquire.lua's reply: {granted, value, ms[, place or
// server time]}, or {2, limit} for a semaphore's key, where ms is the granted TTL, or the holder's PTTL (-1: no
// expiry); start and end are the local times around the request.
func (b *Backend) parseAttempt(r request, res []any, start, end time.Time) (attempt, error) {
	if len(res) == 2 && res[0] == int64(grantMismatch) {
		return attempt{}, b.mismatch(r, res[1])
	}
	if len(res) == 3 && res[0] == int64(grantRestarted) {
		return restarted(r, res), nil
	}
	if len(res) < 3 {
		return attempt{}, fmt.Errorf("%w: acquire reply %v", errMalformed, res)
	}
	granted, _ := res[0].(int64)
	value, _ := res[1].(string)
	ms, _ := res[2].(int64)
	st, err := parseValue(r.key, value, time.Duration(ms)*time.Millisecond)
	if err != nil {
		return attempt{}, err
	}
	if granted == 1 {
		ttl := time.Duration(ms) * time.Millisecond
		l := &lease{b: b, key: r.key, names: r.names, value: value, token: st.Token, ttl: ttl, start: start, minHold: r.o.MinHold}
		if len(res) > 3 {
			us, _ := res[3].(int64)
			l.skew, l.skewKnown = backend.Skew(start, end, time.UnixMicro(us)), true
		}
		return attempt{lease: l}, nil
	}
	a := attempt{held: st, retry: st.TTL}
	if ms < 0 { // a lock without expiry was not written by lockrun; look again after a TTL
		a.retry = r.o.TTL
	}
	if len(res) > 3 {
		a.place, _ = res[3].(string)
	}
	return a, nil
}

// giveBack releases a lease granted after its caller stopped waiting.
func (b *Backend) giveBack(l backend.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), b.opt.ReadTimeout)
	defer cancel()
	_ = l.Release(ctx)
}
