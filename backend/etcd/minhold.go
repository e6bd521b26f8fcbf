package etcd

import (
	"context"
	"math"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// holdOn releases a lease whose minimum hold has left to run: the entry
// moves, in one owner-checked transaction that keeps its create revision
// (the token) and value, to a new lease of the time left rounded up to
// whole seconds, which nobody renews; then the old lease is revoked. The
// entry stays the lock's holder until etcd expires the new lease, and the
// next in line wakes on that deletion. A lease whose entry is gone reports
// ErrLost. A revoked holder has no minimum hold: the move is refused when
// the entry has a revocation marker, and the lease is given back at once.
func (l *lease) holdOn(ctx context.Context, left time.Duration) error {
	defer l.watch.stop() // after the move: the entry's own put changes nothing
	rctx, cancel := l.b.bounded(ctx)
	defer cancel()
	hold, err := l.b.cli.Grant(rctx, max(int64(math.Ceil(left.Seconds())), 1))
	if err != nil {
		return l.b.unavailable("releasing into the minimum hold", l.e.key, err)
	}
	resp, err := l.b.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.e.name), "=", l.e.rev),
			clientv3.Compare(clientv3.CreateRevision(l.b.markerName(l.e.key, l.e.name)), "=", 0)).
		Then(clientv3.OpPut(l.e.name, "", clientv3.WithIgnoreValue(), clientv3.WithLease(hold.ID))).
		Else(clientv3.OpGet(l.e.name, clientv3.WithKeysOnly())).
		Commit()
	if err != nil || !resp.Succeeded {
		l.b.revoke(ctx, hold.ID)
	}
	if err != nil {
		return l.b.unavailable("releasing into the minimum hold", l.e.key, err)
	}
	if !resp.Succeeded {
		if kv := firstKV(resp.Responses[0]); kv != nil && kv.CreateRevision == l.e.rev {
			l.setRevoked() // the entry is ours, so the marker failed the move
			return l.GiveBack(ctx)
		}
	}
	l.b.revoke(ctx, l.e.id) // the entry no longer goes with it
	if !resp.Succeeded {
		return l.b.lost(l.e.key, "released after the lease expired or was revoked")
	}
	return nil
}
