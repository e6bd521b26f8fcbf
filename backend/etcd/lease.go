package etcd

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
)

// lease is the oldest entry of a key's queue: the lock's holder.
type lease struct {
	b *Backend
	e entry

	mu    sync.Mutex
	start time.Time // sent time of the last request that restarted the TTL

	// minHold keeps the entry the lock's holder until the grant (the
	// entry's first start) plus minHold, even when released sooner.
	minHold time.Duration
}

func (b *Backend) newLease(e entry) *lease { return &lease{b: b, e: e, start: e.start} }

// Token is the token written in the holder's entry (see enqueueTxn).
func (l *lease) Token() backend.Token { return l.e.token }

// TTL is the TTL etcd granted: the asked one rounded up to whole seconds,
// or etcd's minimum (1.5 election timeouts) if that is longer.
func (l *lease) TTL() time.Duration { return l.e.ttl }

// Start is the sent time of the grant or of the last keep-alive that
// succeeded.
func (l *lease) Start() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start
}

// Renew sends one keep-alive, then checks that the entry is still ours: a
// lease that is gone, or an entry deleted or replaced, is ErrLost.
func (l *lease) Renew(ctx context.Context) error {
	sent := time.Now()
	if _, err := l.b.keepAlive(ctx, l.e.id); err != nil {
		if isLeaseGone(err) {
			return l.b.lost(l.e.key, "the lease expired or was revoked")
		}
		return l.b.unavailable("renewing the lease", l.e.key, err)
	}
	rctx, cancel := l.b.bounded(ctx)
	defer cancel()
	resp, err := l.b.cli.Get(rctx, l.e.name)
	if err != nil {
		return l.b.unavailable("checking the lock", l.e.key, err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != l.e.rev {
		return l.b.lost(l.e.key, "the holder's entry was deleted")
	}
	l.mu.Lock()
	l.start = sent
	l.mu.Unlock()
	return nil
}

// Release frees the lock: see GiveBack. Within a minimum hold, the entry
// stays the holder's until the hold ends instead (see holdOn).
func (l *lease) Release(ctx context.Context) error {
	if left := time.Until(l.e.start.Add(l.minHold)); left > 0 {
		return l.holdOn(ctx, left)
	}
	return l.GiveBack(ctx)
}

// GiveBack frees the lock at once, minimum hold or not. Its first request
// is the write that wakes the next in line: one transaction deletes the
// entry only while it is still ours (the same create revision), so the
// hand-off waits for one round trip and one WAL write, and that write's
// outcome tells whether the lease was lost. The lease is revoked after it,
// with nothing of the lock left under it; a lease that is gone already
// has lost the lock too. If the revoke fails the lease expires by itself
// within its TTL, holding nothing.
func (l *lease) GiveBack(ctx context.Context) error {
	rctx, cancel := l.b.bounded(ctx)
	defer cancel()
	resp, err := l.b.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.e.name), "=", l.e.rev)).
		Then(clientv3.OpDelete(l.e.name)).
		Commit()
	if err != nil {
		return l.b.unavailable("releasing", l.e.key, err)
	}
	if _, err := l.b.cli.Revoke(rctx, l.e.id); !resp.Succeeded || isLeaseGone(err) {
		return l.b.lost(l.e.key, "released after the lease expired or was revoked")
	}
	return nil
}
