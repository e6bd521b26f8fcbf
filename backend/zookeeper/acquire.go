package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/backend"
)

// errEvicted means a contender's node went away while it queued: its
// session expired, or someone deleted the node (a forced release).
var errEvicted = errors.New("contender node gone while waiting")

// Acquire opens a session for the lease of the TTL plus a tick (see
// startOf; the server may grant more, less is ErrConfig), queues an ephemeral sequential node and takes
// the lock once the node is the lowest and no min-hold keeps the key.
// Without o.Wait a node that is not the lowest is removed again and the
// holder reported (ErrHeld). A waiter whose node is lost queues again at
// the back; one that gives up or fails ends its session, which deletes its
// node at once, and a waiter that is killed leaves a node that goes with
// its session, within the TTL.
func (b *Backend) Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	if err := backend.ValidateRequest(key, o); err != nil {
		return nil, err
	}
	for {
		l, err := b.acquireOnce(ctx, key, o)
		if errors.Is(err, errEvicted) && o.Wait && ctx.Err() == nil {
			continue
		}
		if errors.Is(err, errEvicted) {
			err = b.failed(ctx, "taking the lock", key, err)
		}
		if err != nil {
			return nil, err // not a nil *lease in a non-nil Lease
		}
		return l, nil
	}
}

// acquireOnce does one Acquire on a session of its own.
func (b *Backend) acquireOnce(ctx context.Context, key string, o backend.AcquireOptions) (*lease, error) {
	s := b.takeSpare(o.TTL)
	if s == nil {
		var err error
		if s, err = connect(ctx, b.cfg, o.TTL+b.cfg.TickTime); err != nil {
			return nil, b.failed(ctx, "connecting", key, err)
		}
	}
	if s.timeout-b.cfg.TickTime < o.TTL {
		s.close()
		return nil, fmt.Errorf("%w: %s: lock %q: the ensemble grants sessions of %v at most (its maxSessionTimeout), less than the ttl %v plus a tick (%v): lower --ttl or raise maxSessionTimeout",
			backend.ErrConfig, b.addr, key, s.timeout, o.TTL, b.cfg.TickTime)
	}
	b.track(s)
	b.dropSpare()
	l, err := b.queue(ctx, s, key, o)
	if err != nil {
		b.untrack(s)
		return nil, err
	}
	return l, nil
}

// queue enqueues this run's node and waits its turn (see Acquire). Every
// pass checks the limits of the nodes ahead, from their names: a node
// ahead queued with another limit fails this Acquire at once with a
// *backend.LimitError (see the package doc for why no race of two limits
// lets too many in).
func (b *Backend) queue(ctx context.Context, s *session, key string, o backend.AcquireOptions) (*lease, error) {
	limit := o.EffectiveLimit()
	data := encode(contender{Holder: o.Holder, RunID: o.RunID, Info: o.Info})
	p, err := enqueue(ctx, b, s, key, limit, data)
	if err != nil {
		return nil, b.failed(ctx, "queueing", key, err)
	}
	me := path.Base(p)
	for {
		kids, err := contenders(ctx, b, s, key)
		if err != nil {
			return nil, b.failed(ctx, "reading the queue", key, err)
		}
		i := slices.Index(kids, me)
		if i < 0 {
			return nil, errEvicted
		}
		if have := otherLimit(kids[:i], limit); have != 0 {
			return nil, &backend.LimitError{Key: key, Want: limit, Have: have}
		}
		var l *lease
		if limit > 1 {
			l, err = b.semTurn(ctx, s, key, p, kids, i, o)
		} else {
			l, err = b.plainTurn(ctx, s, key, p, kids, i, o)
		}
		if l != nil || err != nil {
			return l, err
		}
	}
}

// plainTurn is one pass of a plain lock's queue, with this run's node p at
// index i of kids: the lowest takes its turn, the others fail (without
// o.Wait) or wait for their predecessor. No lease and no error: look again.
func (b *Backend) plainTurn(ctx context.Context, s *session, key, p string, kids []string, i int, o backend.AcquireOptions) (*lease, error) {
	switch {
	case i > 0 && !o.Wait:
		return nil, b.heldBy(ctx, s, key, kids[0])
	case i > 0:
		return nil, b.waitGone(ctx, s, b.lockPath(key)+"/"+kids[i-1])
	}
	return b.takeTurn(ctx, s, key, p, o)
}

// takeTurn grants the lock to the lowest node p, unless a min-hold keeps
// the key: then it fails with ErrHeld without o.Wait, and waits until the
// hold ends with it. Semaphore slots kept for their min-hold are another
// limit. It returns no lease and no error when the caller is to look at
// the queue again.
func (b *Backend) takeTurn(ctx context.Context, s *session, key, p string, o backend.AcquireOptions) (*lease, error) {
	st, ver, err := b.readState(ctx, s, key)
	if err != nil {
		return nil, b.failed(ctx, "reading the lock's record", key, err)
	}
	now := time.Now()
	if have := st.limitAt(now, o.RunID); have > 1 {
		return nil, &backend.LimitError{Key: key, Want: 1, Have: have}
	}
	if st.held(now) && st.RunID != o.RunID {
		if !o.Wait {
			return nil, &backend.HeldError{Status: holdStatus(key, st)}
		}
		return nil, b.waitHold(ctx, s, key, st)
	}
	return b.grant(ctx, s, key, p, o, st, ver)
}

// readState reads key's record and its version: the zero record and -1
// when there is none.
func (b *Backend) readState(ctx context.Context, s *session, key string) (state, int32, error) {
	type got struct {
		data []byte
		stat *zk.Stat
	}
	g, err := call(ctx, b.cfg.RequestTimeout, func() (got, error) {
		data, stat, err := s.conn.Get(b.statePath(key))
		return got{data, stat}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return state{}, -1, nil
	case err != nil:
		return state{}, 0, err
	}
	return parseState(g.data), g.stat.Version, nil
}
