package zookeeper

import (
	"cmp"
	"context"
	"errors"
	"path"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.HolderReleaser = (*Backend)(nil)

// A semaphore of limit N is the plain lock's queue with N slots: every
// contender's node carries N in its name (see nodeName), and a node holds
// a slot when fewer nodes are ahead of it than the slots the record's
// min-holds leave free. See docs/backends/zookeeper.md for why this is
// safe.

// semTurn is one pass of a semaphore's queue, with this run's node p at
// index i of kids, every node ahead of it queued with o's limit: it takes
// a slot, fails (ErrHeld without o.Wait; a *LimitError when the record's
// min-holds are of another limit) or waits for a change. No lease and no
// error: look again.
func (b *Backend) semTurn(ctx context.Context, s *session, key, p string, kids []string, i int, o backend.AcquireOptions) (*lease, error) {
	if j := slices.IndexFunc(kids[:i], func(k string) bool { return nodeRun(k) == nodeRun(path.Base(p)) }); j >= 0 {
		// A retried Acquire of this run, whose earlier node still
		// queues or holds: that node is the run's, not a second slot.
		if !o.Wait {
			return nil, b.semHeld(ctx, s, key)
		}
		return nil, b.waitGone(ctx, s, b.lockPath(key)+"/"+kids[j])
	}
	st, ver, err := b.readState(ctx, s, key)
	if err != nil {
		return nil, b.failed(ctx, "reading the lock's record", key, err)
	}
	limit, now := o.EffectiveLimit(), time.Now()
	if have := st.limitAt(now, o.RunID); have != 0 && have != limit {
		return nil, &backend.LimitError{Key: key, Want: limit, Have: have}
	}
	holds := st.holds(now, o.RunID)
	switch free := limit - len(holds); {
	case i < free:
		return b.grant(ctx, s, key, p, o, st, ver)
	case !o.Wait:
		return nil, b.semHeld(ctx, s, key)
	case i > max(free, 0):
		// Not the first waiter: the predecessor's node changes when it
		// is granted (its data) or leaves, and only then can this one
		// be first. A release wakes the first waiter alone.
		granted, err := b.waitWaiter(ctx, s, b.lockPath(key)+"/"+kids[i-1])
		if err != nil || !granted {
			return nil, err
		}
	}
	return nil, b.waitSlot(ctx, s, key, kids, holds, ver)
}

// semHeld is the ErrHeld of a full semaphore, naming its holders.
func (b *Backend) semHeld(ctx context.Context, s *session, key string) error {
	st, err := b.inspect(ctx, s, key)
	if err != nil {
		return b.failed(ctx, "reading the lock", key, err)
	}
	return &backend.HeldError{Status: st}
}

// waitWaiter waits until the waiter node p changes: granted is true when
// it already holds a slot (its data was written), and false once it
// changed or may have; the caller reads the queue again.
func (b *Backend) waitWaiter(ctx context.Context, s *session, p string) (granted bool, err error) {
	type got struct {
		ok   bool
		stat *zk.Stat
		ch   <-chan zk.Event
	}
	g, err := call(ctx, b.cfg.RequestTimeout, func() (got, error) {
		ok, stat, ch, err := s.conn.ExistsW(p)
		return got{ok, stat, ch}, err
	})
	switch {
	case err != nil && s.lost():
		return false, errEvicted
	case err != nil:
		return false, b.retryPause(ctx, s, err)
	case !g.ok:
		return false, nil
	case g.stat.Version != 0:
		return true, nil
	}
	select {
	case <-g.ch:
		return false, nil
	case <-s.gone:
		return false, errEvicted
	case <-ctx.Done():
		return false, b.failed(ctx, "waiting", "", ctx.Err())
	}
}

// waitSlot is the first waiter's wait: until the queue kids changes (a
// holder left; a newcomer wakes it too), the earliest of holds ends, or
// the record (at version ver) changes, as when `release` clears a hold.
func (b *Backend) waitSlot(ctx context.Context, s *session, key string, kids []string, holds []hold, ver int32) error {
	type got struct {
		kids []string
		ch   <-chan zk.Event
	}
	g, err := call(ctx, b.cfg.RequestTimeout, func() (got, error) {
		kids, _, ch, err := s.conn.ChildrenW(b.lockPath(key))
		return got{kids, ch}, err
	})
	switch {
	case err != nil && s.lost():
		return errEvicted
	case err != nil:
		return b.retryPause(ctx, s, err)
	case !slices.Equal(inQueueOrder(g.kids), kids):
		return nil
	}
	var held <-chan zk.Event
	var ends <-chan time.Time
	if len(holds) > 0 {
		end := slices.MinFunc(holds, func(x, y hold) int { return cmp.Compare(x.Until, y.Until) }).Until
		t := time.NewTimer(time.Until(micros(end)))
		defer t.Stop()
		ends = t.C
		ch, changed, err := b.watchState(ctx, s, key, ver)
		if err != nil || changed {
			return err
		}
		held = ch
	}
	select {
	case <-g.ch:
	case <-held:
	case <-ends:
	case <-s.gone:
		return errEvicted
	case <-ctx.Done():
		return b.failed(ctx, "waiting", key, ctx.Err())
	}
	return nil
}

// watchState watches key's record; changed is true when it is no longer
// at version ver.
func (b *Backend) watchState(ctx context.Context, s *session, key string, ver int32) (<-chan zk.Event, bool, error) {
	type got struct {
		stat *zk.Stat
		ch   <-chan zk.Event
	}
	g, err := call(ctx, b.cfg.RequestTimeout, func() (got, error) {
		_, stat, ch, err := s.conn.GetW(b.statePath(key))
		return got{stat, ch}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, true, nil
	case err != nil && s.lost():
		return nil, false, errEvicted
	case err != nil:
		return nil, false, b.retryPause(ctx, s, err)
	}
	return g.ch, g.stat.Version != ver, nil
}

// keepSlot deletes a semaphore holder's node and, in the same multi, adds
// its slot to the key's record until until. The record is written at the
// version just read: the other holders are granted and released
// meanwhile, and a blind write could lower the token or drop their holds.
// The caller holds l.mu.
func (l *lease) keepSlot(ctx context.Context, until time.Time) error {
	b := l.b
	for range 5 {
		st, ver, err := b.readState(ctx, l.s, l.key)
		if err != nil {
			return l.releaseFailed(ctx, err)
		}
		next := state{Token: st.Token, Limit: l.limit, Holds: append(st.holds(time.Now(), ""), hold{
			Until: until.UnixMicro(), Token: l.rec.Token, Holder: l.rec.Holder, RunID: l.rec.RunID, Info: l.rec.Info, Since: l.rec.Since,
		})}
		ops := []any{
			&zk.DeleteRequest{Path: l.node, Version: l.version},
			&zk.SetDataRequest{Path: b.statePath(l.key), Data: encode(next), Version: ver},
		}
		res, err := call(ctx, b.cfg.RequestTimeout, func() ([]zk.MultiResponse, error) { return l.s.conn.Multi(ops...) })
		if len(res) == 2 && res[0].Error == nil && errors.Is(res[1].Error, zk.ErrBadVersion) {
			continue // another holder's grant or release: read again
		}
		if len(res) == 2 && errors.Is(res[0].Error, zk.ErrBadVersion) {
			ours, rerr := l.adoptOwnWrite(ctx)
			if rerr != nil {
				return l.releaseFailed(ctx, rerr)
			}
			if ours {
				continue // a renewal of ours landed unanswered: the node is ours at its new version
			}
			return l.releaseRevoked(ctx) // revoked: no hold
		}
		if err != nil {
			return l.releaseFailed(ctx, err)
		}
		return nil
	}
	return b.failed(ctx, "releasing", l.key, errors.New("the lock's record kept changing"))
}

// releaseFailed maps an error of a release's request.
func (l *lease) releaseFailed(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion):
		return l.b.lost(l.key, "released after the holder's node was deleted")
	case errors.Is(err, zk.ErrSessionExpired) || l.s.lost():
		return l.b.lost(l.key, "released after the ZooKeeper session expired")
	}
	return l.b.failed(ctx, "releasing", l.key, err)
}

// slots is the nodes of kids that hold a slot (or are being granted one)
// of a key whose record is rec: the lowest alone for a plain lock, the
// lowest N less the min-holds for a semaphore of limit N.
func slots(kids []string, rec state, now time.Time) []string {
	if len(kids) == 0 {
		return nil
	}
	limit := nodeLimit(kids[0])
	if limit > 1 {
		limit -= len(rec.holds(now, ""))
	}
	return kids[:max(min(limit, len(kids)), 0)]
}

// semStatus describes a semaphore of limit whose queue is kids and record
// rec: every holder, its slots' nodes and min-holds, oldest token first.
func (b *Backend) semStatus(ctx context.Context, s *session, key string, kids []string, rec state, limit int) (backend.Status, error) {
	now := time.Now()
	var all []backend.Status
	for _, h := range rec.holds(now, "") {
		all = append(all, backend.Status{Key: key, Held: true, Holder: h.Holder, RunID: h.RunID, Token: backend.Token(h.Token),
			TTL: time.Until(micros(h.Until)), Since: micros(h.Since), Info: h.Info})
	}
	for _, k := range slots(kids, rec, now) {
		data, err := call(ctx, b.cfg.RequestTimeout, func() ([]byte, error) {
			data, _, err := s.conn.Get(b.lockPath(key) + "/" + k)
			return data, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile
		} else if err != nil {
			return backend.Status{}, err
		}
		all = append(all, contenderStatus(key, k, data))
	}
	if len(all) == 0 {
		return backend.Status{Key: key, Token: backend.Token(rec.Token)}, nil
	}
	// Oldest token first; a node not granted yet (token 0) last.
	order := func(t backend.Token) backend.Token { return t - 1 }
	slices.SortStableFunc(all, func(x, y backend.Status) int { return cmp.Compare(order(x.Token), order(y.Token)) })
	st := all[0]
	st.Limit, st.Holders = limit, all
	return st, nil
}

// ReleaseHolder deletes the node of key's holder whose token is token, or
// ends the min-hold that keeps its slot; the token is written into a
// node's data once, at its grant, and sequential names are never reused,
// so the node read with that token is the one deleted. No holder with
// that token is ErrLost.
func (b *Backend) ReleaseHolder(ctx context.Context, key string, token backend.Token) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	if token == 0 { // no grant's token: the mark of a node not granted, or another client's
		return b.lost(key, "no holder has token 0")
	}
	s, err := b.adminSession(ctx)
	if err != nil {
		return b.failed(ctx, "connecting", key, err)
	}
	for range 3 {
		done, err := b.releaseHolder(ctx, s, key, token)
		switch {
		case errors.Is(err, errAgain):
			continue
		case err != nil:
			return b.failed(ctx, "breaking the holder", key, err)
		case !done:
			return b.lost(key, "no holder has token "+token.String())
		}
		return nil
	}
	return b.failed(ctx, "breaking the holder", key, errAgain)
}

// errAgain means the queue or the record changed under a request that
// depends on what was read: read again.
var errAgain = errors.New("the lock changed while it was read")

// releaseHolder is one try of ReleaseHolder: done once a holder was
// broken, not done when none has token, errAgain when the key changed
// meanwhile.
func (b *Backend) releaseHolder(ctx context.Context, s *session, key string, token backend.Token) (bool, error) {
	kids, err := contenders(ctx, b, s, key)
	if err != nil {
		return false, err
	}
	rec, ver, err := b.readState(ctx, s, key)
	if err != nil {
		return false, err
	}
	now := time.Now()
	for _, k := range slots(kids, rec, now) {
		p := b.lockPath(key) + "/" + k
		data, err := call(ctx, b.cfg.RequestTimeout, func() ([]byte, error) {
			data, _, err := s.conn.Get(p)
			return data, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		} else if err != nil {
			return false, err
		}
		if contenderStatus(key, k, data).Token != token {
			continue
		}
		_, err = call(ctx, b.cfg.RequestTimeout, func() (struct{}, error) { return struct{}{}, s.conn.Delete(p, -1) })
		if errors.Is(err, zk.ErrNoNode) {
			return false, errAgain // released meanwhile, maybe into a min-hold
		}
		return err == nil, err
	}
	next, found := rec, false
	switch {
	case rec.held(now) && rec.Token == uint64(token):
		next, found = state{Token: rec.Token, Limit: rec.Limit, Holds: rec.holds(now, "")}, true
	default:
		next.Holds = slices.DeleteFunc(rec.holds(now, ""), func(h hold) bool { return h.Token == uint64(token) })
		found = len(next.Holds) < len(rec.holds(now, ""))
	}
	if !found {
		return false, nil
	}
	_, err = call(ctx, b.cfg.RequestTimeout, func() (*zk.Stat, error) { return s.conn.Set(b.statePath(key), encode(next), ver) })
	if errors.Is(err, zk.ErrBadVersion) {
		return false, errAgain
	}
	return err == nil, err
}
