package redis

// A semaphore (AcquireOptions.Limit > 1) lives beside the plain lock's
// key, under the same hash tag, as five keys (lua/sem.lua has the
// layout): the limit; the holders, a sorted set of lock values scored by
// the end of each one's lease on the server's clock (TIME in the
// script); their records; and the waiters' queue, ordered by arrival,
// with the end of each waiter's entry beside it.
//
// Every grant, renewal and release is one script, which first drops the
// holders and waiters whose time is up, so a holder that died frees its
// slot by the end of its own lease, whoever else renews. A grant goes to
// a caller only when a slot is free and fewer live waiters are queued
// before it than there are free slots: a newcomer never jumps the queue.
// A waiter is live while somebody listens on its wake-up channel (PUBSUB
// NUMSUB): one that died or gave up (its connection closed) is dropped
// when it is met; one that froze keeps its place until its entry ends,
// two TTLs after its last try (it tries at least once a TTL).
//
// The plain lock and a semaphore exclude each other: each grant script
// refuses, as a limit mismatch, a key held or awaited the other way, or
// with another limit. Tokens come from the key's one counter.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// grantMismatch is the first element of a grant script's reply when the
// key is held or awaited with another limit.
const grantMismatch = 2

// mismatch is the *backend.LimitError of r, for the key's limit have as
// the script replied it.
func (b *Backend) mismatch(r request, have any) error {
	s, _ := have.(string)
	n, err := strconv.Atoi(s)
	if err != nil {
		return b.unavailable("acquire", r.key, fmt.Errorf("%w: limit %v", errMalformed, have))
	}
	return fmt.Errorf("redis %s: %w", b.url, &backend.LimitError{Key: r.key, Want: r.o.EffectiveLimit(), Have: n})
}

// acquireSem takes a slot of r's semaphore, as Acquire does a plain lock:
// a first try that does not queue, then, with o.Wait, a place in the
// queue until a slot is this waiter's or ctx ends.
func (b *Backend) acquireSem(ctx context.Context, r request) (backend.Lease, error) {
	a, err := b.trySem(ctx, r, "")
	switch {
	case err != nil:
		return nil, err
	case a.lease != nil:
		return a.lease, nil
	case !r.o.Wait:
		return nil, &backend.HeldError{Status: a.held}
	}
	l, err := b.listen(ctx, r)
	if err != nil {
		return nil, err
	}
	defer l.close()
	lease, err := b.waitSem(ctx, r, l)
	if err != nil {
		b.leave(r, l.id)
	}
	return lease, err
}

// waitSem tries, queued as l's waiter, each time a release wakes it or a
// holder's lease can have ended, and at least once a TTL, which keeps
// its queue entry alive.
func (b *Backend) waitSem(ctx context.Context, r request, l *listener) (backend.Lease, error) {
	for {
		a, err := b.trySem(ctx, r, l.id)
		if cause := context.Cause(ctx); cause != nil {
			if a.lease != nil {
				b.giveBackNow(a.lease)
			}
			return nil, fmt.Errorf("waiting for lock %q: %w", r.key, cause)
		}
		if err != nil || a.lease != nil {
			return a.lease, err
		}
		if err := l.next(ctx, r.key, min(a.retry+expirySlack, r.o.TTL)); err != nil {
			return nil, err
		}
	}
}

// leave takes a waiter that stopped waiting out of the queue, at once,
// so that the waiters behind it need not wait for its entry to end.
func (b *Backend) leave(r request, waiter string) {
	ctx, cancel := context.WithTimeout(context.Background(), b.opt.ReadTimeout)
	defer cancel()
	_ = b.scripts.semLeave.Run(ctx, b.client, r.names.sem, waiter, r.names.wake).Err()
}

// trySem runs sem_acquire.lua once; a non-empty waiter is queued when no
// slot is its.
func (b *Backend) trySem(ctx context.Context, r request, waiter string) (attempt, error) {
	keys := append([]string{r.names.lock, r.names.counter}, r.names.sem...)
	limit := strconv.Itoa(r.o.EffectiveLimit())
	start := time.Now() // before the request: the server's TTL starts later
	res, err := b.scripts.semAcquire.Run(ctx, b.client, keys, r.ttlMS, r.o.RunID, r.o.Holder, limit, waiter, r.info, r.names.wake, r.restartMS).Slice()
	if err != nil {
		return attempt{}, b.acquireFailed(r.key, err)
	}
	a, err := b.parseSemAttempt(r, res, start, time.Now())
	if le := (*backend.LimitError)(nil); errors.As(err, &le) {
		return attempt{}, err // a clash of limits is the caller's mistake, not an outage
	}
	if err != nil {
		return attempt{}, b.unavailable("acquire", r.key, err)
	}
	return a, nil
}

// parseSemAttempt reads sem_acquire.lua's reply (see there); start and
// end are the local times around the request. A limit mismatch is
// returned as is (it does not wrap errMalformed).
func (b *Backend) parseSemAttempt(r request, res []any, start, end time.Time) (attempt, error) {
	if len(res) < 2 {
		return attempt{}, fmt.Errorf("%w: acquire reply %v", errMalformed, res)
	}
	switch code, _ := res[0].(int64); {
	case code == grantMismatch:
		return attempt{}, b.mismatch(r, res[1])
	case code == grantRestarted && len(res) == 3:
		return restarted(r, res), nil
	case code == 1 && len(res) == 4:
		value, _ := res[1].(string)
		ms, _ := res[2].(int64)
		us, _ := res[3].(int64)
		st, err := parseValue(r.key, value, 0)
		if err != nil {
			return attempt{}, err
		}
		l := &lease{b: b, key: r.key, names: r.names, value: value, token: st.Token, ttl: time.Duration(ms) * time.Millisecond,
			start: start, minHold: r.o.MinHold, skew: backend.Skew(start, end, time.UnixMicro(us)), skewKnown: true}
		return attempt{lease: &semLease{l}}, nil
	case code == 0 && len(res) == 3:
		ms, _ := res[1].(int64)
		flat, _ := res[2].([]any)
		st, err := semStatus(r.key, r.o.EffectiveLimit(), flat)
		if err != nil {
			return attempt{}, err
		}
		return attempt{held: st, retry: time.Duration(max(ms, 0)) * time.Millisecond}, nil
	}
	return attempt{}, fmt.Errorf("%w: acquire reply %v", errMalformed, res)
}

// giveBackNow frees a slot granted after its caller stopped waiting, at
// once: it was never used, so it keeps no minimum hold.
func (b *Backend) giveBackNow(l backend.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), b.opt.ReadTimeout)
	defer cancel()
	_ = backend.GiveBack(ctx, l)
}
