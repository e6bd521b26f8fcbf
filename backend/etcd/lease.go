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

	// revoked is set once a renewal found the entry's revocation marker
	// (see revoke.go): a release then frees the lock at once and reports
	// ErrLost.
	revoked bool

	// since is when a waiter's turn came, to be marked in its entry (see
	// markPending); 0 once marked, or when there is nothing to mark.
	since int64

	watch *entryWatch // started after the command's start or by a renewal's read; stopped by the release
}

func (b *Backend) newLease(e entry) *lease {
	return &lease{b: b, e: e, start: e.start, watch: newEntryWatch()}
}

// Done is closed when the entry is seen deleted or replaced, or revoked,
// between renewals (see entryWatch): the heartbeat then renews at once,
// and the renewal says why the lock is lost.
func (l *lease) Done() <-chan struct{} { return l.watch.alarm }

// Started marks, if the lease came after a wait, when its turn came, and
// starts watching the entry from its creation on, markDelay after the
// command's exec: the mark's read and write, and the watch's requests,
// would otherwise share the machine with the command's start, the end of
// a hand-off. Without Started (a caller that does not run a command), the
// first renewal marks and watches.
func (l *lease) Started() {
	time.AfterFunc(markDelay, func() {
		l.markPending()
		l.watch.start(l.b, l.e, l.e.rev)
	})
}

// markDelay is how long after the command's exec Started waits to mark:
// the exec is not the end of a start (a dynamic loader, a runtime's own
// start), and the mark, two requests and a write on the server, is only
// for status.
const markDelay = 100 * time.Millisecond

// markPending writes the pending mark (see markOnce), once: whichever of
// Started's timer, the first renewal and a release into a minimum hold
// comes first.
func (l *lease) markPending() {
	l.mu.Lock()
	since := l.since
	l.since = 0
	l.mu.Unlock()
	if since != 0 {
		l.b.markOnce(l.e, since)
	}
}

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

// Renew sends one keep-alive. Unless the entry's watch runs and has seen
// no change (see entryWatch.quiet), it then checks that the entry is still
// ours and not revoked, in one read of the entry and its revocation
// marker, and watches them from there on. A lease that is gone, an entry
// deleted or replaced, or a marker, is ErrLost.
func (l *lease) Renew(ctx context.Context) error {
	sent := time.Now()
	_, h, err := l.b.keepAlive(ctx, l.e.id)
	if err != nil {
		if isLeaseGone(err) {
			return l.b.lost(l.e.key, "the lease expired or was revoked")
		}
		return l.b.unavailable("renewing the lease", l.e.key, err)
	}
	if !l.watch.quiet(h) {
		if err := l.check(ctx); err != nil {
			return err
		}
	}
	l.mu.Lock()
	l.start = sent
	pending := l.since != 0
	l.mu.Unlock()
	if pending {
		go l.markPending()
	}
	return nil
}

// check reads the entry and its revocation marker, and watches both from
// the revision read on.
func (l *lease) check(ctx context.Context) error {
	rctx, cancel := l.b.bounded(ctx)
	defer cancel()
	resp, err := l.b.cli.Txn(rctx).Then(
		clientv3.OpGet(l.e.name),
		clientv3.OpGet(l.b.markerName(l.e.key, l.e.name), clientv3.WithCountOnly()),
	).Commit()
	if err != nil {
		return l.b.unavailable("checking the lock", l.e.key, err)
	}
	if kv := firstKV(resp.Responses[0]); kv == nil || kv.CreateRevision != l.e.rev {
		return l.b.lost(l.e.key, "the holder's entry was deleted")
	}
	if resp.Responses[1].GetResponseRange().Count > 0 {
		l.setRevoked()
		return l.b.lost(l.e.key, "the holder was revoked")
	}
	l.watch.start(l.b, l.e, resp.Header.Revision+1)
	return nil
}

// Release frees the lock: see GiveBack. Within a minimum hold, the entry
// stays the holder's until the hold ends instead (see holdOn).
func (l *lease) Release(ctx context.Context) error {
	if left := time.Until(l.e.start.Add(l.minHold)); left > 0 && !l.isRevoked() {
		l.markPending() // status shows the holder for the whole hold
		return l.holdOn(ctx, left)
	}
	return l.GiveBack(ctx)
}

// dropMark forgets the pending mark of a lease about to be given back.
func (l *lease) dropMark() {
	l.mu.Lock()
	l.since = 0
	l.mu.Unlock()
}

// GiveBack frees the lock at once, minimum hold or not. Its first request
// is the write that wakes the next in line: one transaction deletes the
// entry only while it is still ours (the same create revision), so the
// hand-off waits for one round trip and one WAL write, and that write's
// outcome tells whether the lease was lost; the same transaction reads the
// revocation marker, so a revoked holder's release frees the lock all the
// same and reports ErrLost. A lease that is gone has lost the lock too:
// its entry went with it, and the compare fails. The lease is then
// revoked in the background, taking the marker with it (see revokeLater),
// within ctx's deadline: at once if no one else has an entry for the key,
// else revokeDelay later. Close the backend before exiting, or the revoke
// may not be sent (the lease then expires within its TTL).
func (l *lease) GiveBack(ctx context.Context) error {
	// The watch's cancellation is a request on the connection: after the
	// release's, which wakes the next in line.
	defer l.watch.stop()
	l.dropMark()
	rctx, cancel := l.b.bounded(ctx)
	defer cancel()
	resp, err := l.b.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.e.name), "=", l.e.rev)).
		Then(clientv3.OpDelete(l.e.name), clientv3.OpGet(l.b.markerName(l.e.key, l.e.name), clientv3.WithCountOnly()),
			clientv3.OpGet(l.b.queuePrefix(l.e.key), clientv3.WithPrefix(), clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return l.b.unavailable("releasing", l.e.key, err)
	}
	var after time.Duration
	if resp.Succeeded && resp.Responses[2].GetResponseRange().Count > 0 {
		after = revokeDelay // someone waits, and is about to read
	}
	l.b.revokeLater(ctx, l.e.id, after)
	if !resp.Succeeded {
		return l.b.lost(l.e.key, "released after the lease expired or was revoked")
	}
	if l.isRevoked() || resp.Responses[1].GetResponseRange().Count > 0 {
		return l.b.lost(l.e.key, "released after the holder was revoked")
	}
	return nil
}

// revokeDelay is how long a released lease whose key has waiters waits
// for its revoke: the next in line sees the release and reads the queue,
// a round trip, and the revoke's WAL write reaching etcd first would hold
// that read up. Close waits for it.
var revokeDelay = 3 * time.Millisecond

func (l *lease) setRevoked() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.revoked = true
}

func (l *lease) isRevoked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.revoked
}
