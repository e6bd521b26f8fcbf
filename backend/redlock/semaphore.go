package redlock

// A semaphore (AcquireOptions.Limit > 1) is kept on every master as
// package redis keeps it on its one server (a sorted set of holders
// scored by the end of each lease, their records, a FIFO queue of
// waiters), plus one thing Redlock needs: slot indexes. A holder takes
// one index from 0 to limit-1, and a master grants an index to one live
// holder at a time. A holder owns its slot only while a majority of the
// masters hold it with that index: any two majorities share a master, so
// two holders never share an index, and no more than limit holders ever
// own a slot. (Counting holders per master would not do: with 3 masters
// and a limit of 2, holders A, B and C could each hold two masters,
// {A,B}, {B,C}, {A,C}, and no master see more than two.)
//
// Acquire peeks at every master (queuing the waiter where no slot is its
// turn), picks the lowest index that a majority has free and that no
// master that answered gives to another run, and grants it on every
// master with a token above all they reported, as the plain lock does;
// the validity arithmetic, the token and the give-back of a grant that
// did not hold are the plain lock's. FIFO holds per master (each master's
// grant refuses a caller while live waiters queued before it are still to
// be served); waiters are ordered by their hosts' clocks when they began
// to wait, the same place on every master: see docs/backends/redlock.md.

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// mismatch is the *backend.LimitError of r for the key's limit have
// ("1": the plain lock).
func (b *Backend) mismatch(r *request, have string) error {
	n, err := strconv.Atoi(have)
	if err != nil {
		return fmt.Errorf("%w: redlock %s: acquire %q: %w: limit %q", backend.ErrUnavailable, b.url, r.key, errMalformed, have)
	}
	return fmt.Errorf("redlock %s: %w", b.url, &backend.LimitError{Key: r.key, Want: r.o.EffectiveLimit(), Have: n})
}

// acquireSem takes a slot of r's semaphore, as Acquire does a plain lock.
func (b *Backend) acquireSem(ctx context.Context, r *request) (backend.Lease, error) {
	a, err := b.tryHard(ctx, r, b.trySem)
	switch {
	case err != nil:
		return nil, err
	case a.lease != nil:
		return a.lease, nil
	case !r.o.Wait:
		return nil, &backend.HeldError{Status: a.held}
	}
	r.waiter, r.place = rand.Text(), fmt.Sprint(time.Now().UnixMicro())
	l, err := b.listen(ctx, r)
	if err != nil {
		return nil, err
	}
	defer l.close()
	lease, err := b.waitSem(ctx, r, l)
	if err != nil {
		b.leave(r)
	}
	return lease, err
}

// waitSem tries, queued as r's waiter, each time a release wakes it or a
// holder's lease can have ended, and at least once a TTL, which keeps
// its queue entries alive.
func (b *Backend) waitSem(ctx context.Context, r *request, l *listener) (backend.Lease, error) {
	for {
		a, err := b.tryHard(ctx, r, b.trySem)
		if cause := context.Cause(ctx); cause != nil {
			if a.lease != nil {
				b.giveBackNow(a.lease)
			}
			return nil, fmt.Errorf("waiting for lock %q: %w", r.key, cause)
		}
		if err != nil || a.lease != nil {
			return a.lease, err
		}
		if err := l.next(ctx, r.key, min(a.held.TTL+expirySlack, r.o.TTL)); err != nil {
			return nil, err
		}
	}
}

// leave takes a waiter that stopped waiting out of every master's queue
// that answers, so that the waiters behind it need not wait for its
// entries to end. It returns once a majority answered, and a little
// more (linger); the calls to slower masters go on in the background.
func (b *Backend) leave(r *request) {
	ctx, stop := detached(context.Background(), b.callTimeout(r.o.TTL))
	defer stop()
	fanoutLinger(ctx, b.masters, func(ctx context.Context, m *master) (int64, error) {
		return b.scripts.semLeave.Run(ctx, m.client, r.names.sem, r.waiter, r.names.wake).Int64()
	}, func(rs []reply[int64]) bool { return answered(rs) >= b.quorum }, b.linger(r.o.TTL))
}

// trySem makes one attempt at a slot: a peek at every master, then, when
// an index is free on a majority, a grant of it on every master.
func (b *Backend) trySem(ctx context.Context, r *request) (attempt, error) {
	start := time.Now() // before the first request: no master's TTL starts earlier
	pctx, cancel := context.WithTimeout(ctx, b.callTimeout(r.o.TTL))
	v := b.peekSem(pctx, r)
	cancel()
	if n := answered(v); n < b.quorum {
		return attempt{}, b.noQuorum("acquire", r.key, n, errorsOf(v))
	}
	if have, ok := b.semMismatch(r, v); ok {
		return attempt{}, b.mismatch(r, have)
	}
	index, ok := b.freeIndex(r, v)
	if !ok {
		return b.semBlocked(r, v, false), nil
	}
	highest, clocks := semHighest(v)
	for i := 1; ; i++ {
		token, err := nextToken(highest, clocks, time.Now())
		if err != nil {
			return attempt{}, fmt.Errorf("%w: redlock %s: acquire %q: %w", backend.ErrUnavailable, b.url, r.key, err)
		}
		value := token.String() + " " + r.o.RunID + " " + r.o.Holder
		g := b.grantSem(ctx, r, value, token, index)
		if ok, _, _ := tally(g.rs, granted); ok >= b.quorum {
			a, err := b.granted(r, value, token, start, g, func() { b.abandonSem(r, value, g) })
			if a.lease != nil {
				a.lease = &semLease{lease: a.lease.(*lease), index: index}
			}
			return a, err
		}
		b.abandonSem(r, value, g)
		stale := staleTop(g.rs)
		if stale == 0 || i == staleRetries {
			if n := answered(g.rs); n < b.quorum {
				return attempt{}, b.noQuorum("acquire", r.key, n, errorsOf(g.rs))
			}
			if a, ok := b.restartBlocked(r, g.rs); ok {
				return a, nil
			}
			return b.semBlocked(r, v, true), nil
		}
		highest = max(highest, stale)
	}
}

// grantSem runs sem_grant.lua for slot index on every master, as grant
// does for the plain lock.
func (b *Backend) grantSem(ctx context.Context, r *request, value string, token backend.Token, index int) round {
	ctx, stop := detached(ctx, b.callTimeout(r.o.TTL))
	defer stop()
	keys := append(append([]string{r.names.lock, r.names.counter}, r.names.sem...), r.names.slotOf)
	limit := strconv.Itoa(r.o.EffectiveLimit())
	args := []any{value, r.px, token.String(), r.o.RunID, r.waiter, r.info, limit, strconv.Itoa(index), r.names.wake, r.restartMS}
	return b.grantWith(ctx, b.scripts.semGrant, keys, args, 0)
}

// abandonSem gives a semaphore grant that did not hold back, as abandon
// does a plain one's.
func (b *Backend) abandonSem(r *request, value string, g round) {
	abandonWith(b.masters, g, func(ms []*master, decided func([]reply[int64]) bool) {
		b.semReleaseOn(context.Background(), ms, r.names, value, 0, r.o.TTL, g.landed, decided)
	})
}

// giveBackNow frees a slot granted after its caller stopped waiting, at
// once: it was never used, so it keeps no minimum hold.
func (b *Backend) giveBackNow(l backend.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), b.opt.ReadTimeout)
	defer cancel()
	_ = backend.GiveBack(ctx, l)
}
