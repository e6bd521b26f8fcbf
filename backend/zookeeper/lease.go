package zookeeper

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/backend"
)

// grant makes the lowest node p the holder: in one multi it writes the
// token into p's data (which fails unless p, owned by this session, still
// exists) and into key's record (which fails if the record changed since
// it was read as st at version ver). The token is at least the wall clock
// in µs and above the record's last: the record is written by holders
// only, each checked against the version it read, so tokens per key only
// grow, and they stay on the clock's scale when the ensemble is wiped.
// A record that changed (a forced release, a concurrent first grant, a
// semaphore's other holder granted or released meanwhile) returns no lease
// and no error: the caller looks again. A semaphore's slots kept for their
// min-hold stay in the record.
func (b *Backend) grant(ctx context.Context, s *session, key, p string, o backend.AcquireOptions, st state, ver int32) (*lease, error) {
	now := time.Now()
	c := contender{Holder: o.Holder, RunID: o.RunID, Info: o.Info, Token: nextToken(st.Token, now), Since: now.UnixMicro()}
	c.Renewed = c.Since
	rec := encode(st.granted(c.Token, now, o.RunID))
	ops := []any{&zk.SetDataRequest{Path: p, Data: encode(c), Version: 0}}
	if ver < 0 {
		ops = append(ops, &zk.CreateRequest{Path: b.statePath(key), Data: rec, Acl: b.acl, Flags: zk.FlagPersistent})
	} else {
		ops = append(ops, &zk.SetDataRequest{Path: b.statePath(key), Data: rec, Version: ver})
	}
	sent := time.Now()
	res, err := call(ctx, b.cfg.RequestTimeout, func() ([]zk.MultiResponse, error) { return s.conn.Multi(ops...) })
	switch {
	case err == nil:
	case len(res) == 2 && errors.Is(res[0].Error, zk.ErrNoNode):
		return nil, errEvicted // our node was deleted
	case len(res) == 2 && errors.Is(res[1].Error, zk.ErrNoNode):
		if err := b.ensure(ctx, s, b.stateDir()); err != nil {
			return nil, b.failed(ctx, "creating the lock's record", key, err)
		}
		return nil, nil
	case errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists):
		return nil, nil
	default:
		return nil, b.failed(ctx, "taking the lock", key, err)
	}
	l := &lease{b: b, s: s, key: key, node: p, token: backend.Token(c.Token), rec: c, czxid: res[0].Stat.Czxid, version: res[0].Stat.Version, minHold: o.MinHold, limit: o.EffectiveLimit()}
	l.start = b.startOf(sent)
	l.mu.Lock() // pastDeadline reads l.deadline under l.mu
	l.deadline = time.AfterFunc(l.TTL(), l.pastDeadline)
	l.mu.Unlock()
	return l, nil
}

// startOf is the lease start for a request sent at sent. A follower passes
// a session's activity on to the leader, which expires sessions, up to
// about half a tick late: the session was asked for a tick more than the
// lease's TTL, so the leader cannot expire it before sent plus the TTL.
func (b *Backend) startOf(sent time.Time) time.Time { return sent }

// lease is the lowest contender node of a key, on its own session.
type lease struct {
	b       *Backend
	s       *session
	key     string
	node    string // full path of the holder's node
	czxid   int64  // the node's creation, to tell it from a later one of the same name
	minHold time.Duration
	limit   int // 1 for a plain lock
	// token is the grant's, kept apart from rec so that Token reads it
	// without l.mu while Renew rewrites rec.
	token backend.Token

	mu      sync.Mutex
	rec     contender // the node's data
	version int32     // the node's data version, as last written by us
	// unsure holds the data of our writes to the node since the last one
	// the server answered, whose fate is unknown (the call gave up
	// waiting): one may have been applied all the same, and moved the
	// version on without us (see adoptOwnWrite).
	unsure [][]byte
	start  time.Time
	// deadline fires at start plus the TTL: see pastDeadline.
	deadline *time.Timer
}

// Token is the token written at the grant.
func (l *lease) Token() backend.Token { return l.token }

// TTL is the session timeout the server negotiated less a tick (see
// startOf): never less than asked.
func (l *lease) TTL() time.Duration { return l.s.timeout - l.b.cfg.TickTime }

// Start is the sent time of the grant or of the last renewal that
// succeeded.
func (l *lease) Start() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start
}

// Renew writes the renewal time into the holder's node, checked against
// the version we last wrote: the write reaches the leader, which refuses
// it for an expired session, and succeeds only while the node is ours.
// A session that expired, or a node deleted or replaced, is ErrLost.
func (l *lease) Renew(ctx context.Context) error {
	if l.s.lost() {
		return l.b.lost(l.key, "the ZooKeeper session expired")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := l.rec
	sent := time.Now()
	rec.Renewed = sent.UnixMicro()
	data := encode(rec)
	var stat *zk.Stat
	var err error
	for try := 0; try < 2; try++ {
		l.noteWrite(data)
		stat, err = call(ctx, l.b.cfg.RequestTimeout, func() (*zk.Stat, error) {
			return l.s.conn.Set(l.node, data, l.version)
		})
		if !errors.Is(err, zk.ErrBadVersion) {
			break
		}
		ours, rerr := l.adoptOwnWrite(ctx)
		if rerr != nil { // not known to be lost: the heartbeat tries again
			return l.b.failed(ctx, "renewing (reading the holder's node)", l.key, rerr)
		}
		if !ours {
			break
		}
	}
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return l.b.lost(l.key, "the holder's node was deleted")
	case errors.Is(err, zk.ErrBadVersion):
		// Only this lease writes its node, but for Revoke's mark.
		return l.b.lost(l.key, "the holder was revoked (`lockrun release`)")
	case errors.Is(err, zk.ErrSessionExpired) || l.s.lost():
		return l.b.lost(l.key, "the ZooKeeper session expired")
	case err != nil:
		return l.b.failed(ctx, "renewing", l.key, err)
	case stat.Czxid != l.czxid:
		return l.b.lost(l.key, "the holder's node was replaced")
	}
	l.rec, l.version, l.start, l.unsure = rec, stat.Version, l.b.startOf(sent), nil
	l.deadline.Reset(time.Until(l.start.Add(l.TTL())))
	return nil
}

// maxUnsure bounds the writes of unknown fate kept: renewals that time out
// one after another within a TTL are a few.
const maxUnsure = 16

// noteWrite records data, about to be written to the node, as of unknown
// fate until the server answers. The caller holds l.mu.
func (l *lease) noteWrite(data []byte) {
	if len(l.unsure) == maxUnsure {
		l.unsure = l.unsure[1:]
	}
	l.unsure = append(l.unsure, data)
}

// adoptOwnWrite tells, after the server refused the node's version, whether
// the node holds one of our own writes of unknown fate (the server applied
// a renewal whose answer we gave up waiting for), and then takes its
// version as ours. Anything else (a revocation's mark, a node replaced or
// gone) is not ours; a read that failed is an error, since it tells
// neither. Each renewal's data differs from every other (its time, in
// µs), so equal data is our write. The caller holds l.mu.
func (l *lease) adoptOwnWrite(ctx context.Context) (bool, error) {
	if len(l.unsure) == 0 {
		return false, nil
	}
	g, err := l.readNode(ctx)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return false, nil
	case err != nil:
		return false, err
	case g.stat.Czxid != l.czxid:
		return false, nil
	}
	for _, w := range l.unsure {
		if bytes.Equal(w, g.data) {
			l.version, l.unsure = g.stat.Version, nil
			return true, nil
		}
	}
	return false, nil
}

// Release deletes the holder's node, checked against our version, and
// ends the session. With a min-hold that has not passed, the same multi
// writes the hold into the key's record, so that the key stays taken
// until the grant plus the min-hold with no moment free in between.
func (l *lease) Release(ctx context.Context) error {
	return l.release(ctx, l.minHold)
}

// GiveBack deletes the holder's node, checked against our version, with
// no minimum hold after it, and ends the session.
func (l *lease) GiveBack(ctx context.Context) error { return l.release(ctx, 0) }

// release deletes the holder's node and, while hold after the grant has
// not passed, writes that hold into the key's record in the same multi.
// A node changed since our last write was revoked: releaseRevoked frees
// it without the hold.
func (l *lease) release(ctx context.Context, hold time.Duration) error {
	defer l.b.untrack(l.s)
	l.deadline.Stop()
	if l.s.lost() {
		return l.b.lost(l.key, "released after the ZooKeeper session expired")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if until := micros(l.rec.Since).Add(hold); l.limit > 1 && hold > 0 && time.Now().Before(until) {
		return l.keepSlot(ctx, until)
	}
	ops := []any{&zk.DeleteRequest{Path: l.node, Version: l.version}}
	if until := micros(l.rec.Since).Add(hold); hold > 0 && time.Now().Before(until) {
		st := state{Token: l.rec.Token, HoldUntil: until.UnixMicro(), Holder: l.rec.Holder, RunID: l.rec.RunID, Info: l.rec.Info, Since: l.rec.Since}
		ops = append(ops, &zk.SetDataRequest{Path: l.b.statePath(l.key), Data: encode(st), Version: -1})
	}
	_, err := call(ctx, l.b.cfg.RequestTimeout, func() ([]zk.MultiResponse, error) { return l.s.conn.Multi(ops...) })
	if errors.Is(err, zk.ErrBadVersion) {
		ours, rerr := l.adoptOwnWrite(ctx)
		if rerr != nil {
			return l.releaseFailed(ctx, rerr)
		}
		if ours { // a renewal of ours landed unanswered
			ops[0] = &zk.DeleteRequest{Path: l.node, Version: l.version}
			_, err = call(ctx, l.b.cfg.RequestTimeout, func() ([]zk.MultiResponse, error) { return l.s.conn.Multi(ops...) })
		}
	}
	switch {
	case errors.Is(err, zk.ErrBadVersion): // only the delete checks a version
		return l.releaseRevoked(ctx)
	case errors.Is(err, zk.ErrNoNode):
		return l.b.lost(l.key, "released after the holder's node was deleted")
	case errors.Is(err, zk.ErrSessionExpired) || err != nil && l.s.lost():
		return l.b.lost(l.key, "released after the ZooKeeper session expired")
	case err != nil:
		return l.b.failed(ctx, "releasing", l.key, err)
	}
	return nil
}

// node is the holder's node as one read found it.
type node struct {
	data []byte
	stat *zk.Stat
}

// readNode reads the lease's node within the request timeout.
func (l *lease) readNode(ctx context.Context) (node, error) {
	return call(ctx, l.b.cfg.RequestTimeout, func() (node, error) {
		data, stat, err := l.s.conn.Get(l.node)
		return node{data, stat}, err
	})
}
