package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/backend"
)

// waitGone returns once the node p (the predecessor of this waiter's node)
// is gone, or may be: the watch fired or broke, and the caller reads the
// queue again. Watching only the predecessor means a release wakes the next
// in line alone, so a hand-off costs the same with a hundred waiters. A
// watch that fired for a write to p (the holder's renewal) is set again,
// one request a renewal: p is still there, and the queue need not be read.
// It fails with errEvicted when the session expired, and with ctx's cause.
func (b *Backend) waitGone(ctx context.Context, s *session, p string) error {
	type got struct {
		ok bool
		ch <-chan zk.Event
	}
	for {
		g, err := call(ctx, b.cfg.RequestTimeout, func() (got, error) {
			ok, _, ch, err := s.conn.ExistsW(p)
			return got{ok, ch}, err
		})
		switch {
		case err != nil && s.lost():
			return errEvicted
		case err != nil:
			return b.retryPause(ctx, s, err)
		case !g.ok:
			return nil
		}
		select {
		case ev := <-g.ch:
			if ev.Type != zk.EventNodeDataChanged {
				return nil
			}
		case <-s.gone:
			return errEvicted
		case <-ctx.Done():
			return b.failed(ctx, "waiting", "", ctx.Err())
		}
	}
}

// queueRetry is the pause before reading the queue again after a failed
// request, while the waiter keeps its place (its session lives on while
// the library reconnects).
const queueRetry = 200 * time.Millisecond

// retryPause waits queueRetry after a failed request of a waiter: nil to
// try again, or why not.
func (b *Backend) retryPause(ctx context.Context, s *session, err error) error {
	if isPermission(err) {
		return b.failed(ctx, "waiting", "", err)
	}
	select {
	case <-time.After(queueRetry):
		return nil
	case <-s.gone:
		return errEvicted
	case <-ctx.Done():
		return b.failed(ctx, "waiting", "", ctx.Err())
	}
}

// waitHold waits until the min-hold in st ends, or key's record changes
// (a forced release clears it).
func (b *Backend) waitHold(ctx context.Context, s *session, key string, st state) error {
	ch, err := call(ctx, b.cfg.RequestTimeout, func() (<-chan zk.Event, error) {
		_, _, ch, err := s.conn.GetW(b.statePath(key))
		return ch, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	} else if err != nil {
		return b.retryPause(ctx, s, err)
	}
	t := time.NewTimer(time.Until(micros(st.HoldUntil)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ch:
	case <-s.gone:
		return errEvicted
	case <-ctx.Done():
		return b.failed(ctx, "waiting for the min-hold to end", key, ctx.Err())
	}
	return nil
}

// heldBy is the ErrHeld of a key whose holder is node.
func (b *Backend) heldBy(ctx context.Context, s *session, key, node string) error {
	st := backend.Status{Key: key, Held: true, Holder: node}
	data, err := call(ctx, b.cfg.RequestTimeout, func() ([]byte, error) {
		data, _, err := s.conn.Get(b.lockPath(key) + "/" + node)
		return data, err
	})
	if err == nil {
		st = contenderStatus(key, node, data)
	}
	return &backend.HeldError{Status: st}
}

// contenderStatus describes key held by the contender node with data.
func contenderStatus(key, node string, data []byte) backend.Status {
	c, ok := parseContender(data)
	if !ok { // another client's node, e.g. Curator's
		return backend.Status{Key: key, Held: true, Holder: fmt.Sprintf("(%s)", node)}
	}
	return backend.Status{Key: key, Held: true, Holder: c.Holder, RunID: c.RunID, Token: backend.Token(c.Token),
		Since: micros(c.Since), Renewed: micros(c.Renewed), Info: c.Info, Revoked: c.Revoked}
}

// holdStatus describes key kept taken by the min-hold in st.
func holdStatus(key string, st state) backend.Status {
	return backend.Status{Key: key, Held: true, Holder: st.Holder, RunID: st.RunID, Token: backend.Token(st.Token),
		TTL: time.Until(micros(st.HoldUntil)), Since: micros(st.Since), Info: st.Info}
}
