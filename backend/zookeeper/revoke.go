package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.Revoker = (*Backend)(nil)

// errForeign means the holder to revoke is another client's node (Curator,
// kazoo): it has no record to mark, and its owner would not read one.
var errForeign = errors.New("the lock is held by another client's node, which has no revoked mark")

// Revoke marks the node of key's holder whose token is token (every
// holder's for 0) revoked, in one multi whose writes are checked against
// the versions just read. The node stays, owned by the holder's session,
// so the lock or slot stays taken and waiters keep waiting; the mark
// changes the node's version, so the holder's next renewal (a write at the
// version it last wrote) fails, and its release, which deletes the node,
// frees it at once (see lease.releaseRevoked). A session that ends frees
// it as after a crash. A slot or lock kept only for a min-hold has no
// command running: Revoke ends that hold in the same multi, as
// ReleaseHolder does. Revoke(key, 0) also checks the record's version, so
// no holder granted after the read escapes it.
func (b *Backend) Revoke(ctx context.Context, key string, token backend.Token) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	s, err := b.adminSession(ctx)
	if err != nil {
		return b.failed(ctx, "connecting", key, err)
	}
	for try := range revokeTries {
		found, err := b.revokeOnce(ctx, s, key, token, try >= revokeTries/2)
		switch {
		case errors.Is(err, errAgain):
			// A renewal between the read and the write: renewals are a
			// third of a TTL apart, so the next try is all but sure.
			if err := pause(ctx, time.Duration(try)*5*time.Millisecond); err != nil {
				return b.failed(ctx, "revoking", key, err)
			}
			continue
		case errors.Is(err, errForeign):
			return fmt.Errorf("%w: %s: lock %q: %w: use `lockrun release` without --revoke", backend.ErrHeld, b.addr, key, err)
		case err != nil:
			return b.failed(ctx, "revoking", key, err)
		case !found:
			return b.lost(key, "no holder has token "+token.String())
		}
		return nil
	}
	return b.failed(ctx, "revoking", key, errAgain)
}

// revokeTries bounds Revoke's reads and writes against a key that keeps
// changing under it.
const revokeTries = 20

// pause waits d, or less when ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// revokeOnce is one try of Revoke: found is false when token is not 0 and
// no holder has it; errAgain when the key changed since it was read. With
// blind, the marks are written at any version (see revokeNodes).
func (b *Backend) revokeOnce(ctx context.Context, s *session, key string, token backend.Token, blind bool) (bool, error) {
	kids, err := contenders(ctx, b, s, key)
	if err != nil {
		return false, err
	}
	rec, ver, err := b.readState(ctx, s, key)
	if err != nil {
		return false, err
	}
	now := time.Now()
	ops, found, err := b.revokeNodes(ctx, s, key, slots(kids, rec, now), token, blind)
	if err != nil {
		return false, err
	}
	if next, ended := rec.without(now, token); ended {
		ops, found = append(ops, &zk.SetDataRequest{Path: b.statePath(key), Data: encode(next), Version: ver}), true
	} else if token == 0 && ver >= 0 && len(ops) > 0 {
		ops = append(ops, &zk.CheckVersionRequest{Path: b.statePath(key), Version: ver})
	}
	if len(ops) == 0 {
		return found || token == 0, nil
	}
	_, err = call(ctx, b.cfg.RequestTimeout, func() ([]zk.MultiResponse, error) { return s.conn.Multi(ops...) })
	if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
		return false, errAgain // a renewal, release or grant meanwhile
	}
	return err == nil, err
}

// revokeNodes reads the holder nodes and returns the writes that mark
// those of token (all for 0) revoked, each at the version read. found
// tells whether a holder has token, already revoked or not. With blind
// (a holder renewing faster than Revoke reads and writes), the write is
// at any version: the token is written into a node once, at its grant,
// and sequential names are not reused, so the node is still the one read
// (a vanished one fails the write); only the renewal time a renewal wrote
// meanwhile is lost, and that renewal's lease is the one revoked.
func (b *Backend) revokeNodes(ctx context.Context, s *session, key string, nodes []string, token backend.Token, blind bool) (ops []any, found bool, err error) {
	type got struct {
		data []byte
		stat *zk.Stat
	}
	for _, k := range nodes {
		p := b.lockPath(key) + "/" + k
		g, err := call(ctx, b.cfg.RequestTimeout, func() (got, error) {
			data, stat, err := s.conn.Get(p)
			return got{data, stat}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return nil, false, errAgain // released meanwhile
		} else if err != nil {
			return nil, false, err
		}
		c, ok := parseContender(g.data)
		switch {
		case !ok && token == 0:
			return nil, false, errForeign
		case !ok || c.Token == 0 || token != 0 && backend.Token(c.Token) != token:
			continue // another's, or a node being granted: not a holder yet
		}
		found = true
		if !c.Revoked {
			c.Revoked = true
			ver := g.stat.Version
			if blind {
				ver = -1
			}
			ops = append(ops, &zk.SetDataRequest{Path: p, Data: encode(c), Version: ver})
		}
	}
	return ops, found, nil
}

// without is the record with the min-hold of token (every one for 0)
// ended, and whether there was one to end; the token stays.
func (s state) without(now time.Time, token backend.Token) (state, bool) {
	next := state{Token: s.Token, Limit: s.Limit}
	ended := s.held(now) && (token == 0 || s.Token == uint64(token))
	if !ended && s.held(now) {
		next.HoldUntil, next.Holder, next.RunID, next.Info, next.Since = s.HoldUntil, s.Holder, s.RunID, s.Info, s.Since
	}
	for _, h := range s.holds(now, "") {
		if token == 0 || h.Token == uint64(token) {
			ended = true
			continue
		}
		next.Holds = append(next.Holds, h)
	}
	if len(next.Holds) == 0 {
		next.Limit = 0
	}
	return next, ended
}

// releaseRevoked deletes the holder's node after a release found it
// changed by another client (Revoke marks it): the node is still this
// session's, told by its creation, so it goes at once, with no min-hold
// (the release is the end of a broken run), and the release reports the
// loss. The caller holds l.mu.
func (l *lease) releaseRevoked(ctx context.Context) error {
	for range 3 {
		g, err := l.readNode(ctx)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			return l.b.lost(l.key, "released after the holder's node was deleted")
		case err != nil:
			return l.releaseFailed(ctx, err)
		case g.stat.Czxid != l.czxid:
			return l.b.lost(l.key, "released after the holder's node was replaced")
		}
		_, err = call(ctx, l.b.cfg.RequestTimeout, func() (struct{}, error) {
			return struct{}{}, l.s.conn.Delete(l.node, g.stat.Version)
		})
		switch {
		case errors.Is(err, zk.ErrBadVersion):
			continue // changed again: read it again
		case err != nil:
			return l.releaseFailed(ctx, err)
		}
		if c, _ := parseContender(g.data); c.Revoked {
			return l.b.lost(l.key, "revoked by `lockrun release`; released")
		}
		return l.b.lost(l.key, "the holder's node was changed by another client; released")
	}
	return l.b.failed(ctx, "releasing", l.key, errors.New("the holder's node kept changing"))
}

// pastDeadline runs when the lease's TTL has passed since its last renewal
// and again every quarter TTL while no renewal comes: a revoked holder
// that no longer renews (its lockrun stuck, its command killed by the
// watchdog at this deadline) deletes its node, so that its lock is free
// at its lease's end as on the other backends; the client library's pings
// would keep the session, and the node, alive as long as the process.
// Only a lease past its deadline reads its node: a renewed one pays no
// request. A lease that was not revoked keeps its node, as before.
func (l *lease) pastDeadline() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s.lost() {
		return
	}
	if left := time.Until(l.start.Add(l.TTL())); left > 0 {
		l.deadline.Reset(left) // renewed meanwhile
		return
	}
	if !l.dropIfRevoked(context.Background()) {
		l.deadline.Reset(l.TTL() / 4)
	}
}

// dropIfRevoked deletes the lease's node when Revoke marked it, and tells
// whether the node is gone. The caller holds l.mu.
func (l *lease) dropIfRevoked(ctx context.Context) bool {
	g, err := l.readNode(ctx)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return true
	case err != nil:
		return false // try again at the next tick
	case g.stat.Czxid != l.czxid:
		return true // not ours any more
	}
	if c, _ := parseContender(g.data); !c.Revoked {
		return false
	}
	_, err = call(ctx, l.b.cfg.RequestTimeout, func() (struct{}, error) {
		return struct{}{}, l.s.conn.Delete(l.node, g.stat.Version)
	})
	return err == nil || errors.Is(err, zk.ErrNoNode)
}
