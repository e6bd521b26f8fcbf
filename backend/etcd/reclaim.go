package etcd

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
)

// The runner tries Acquire again, with the same RunID, after a transient
// failure. When the first try's enqueue reached etcd but its reply was
// lost, and the revoke that should have dropped its lease failed too, the
// queue still holds that try's entry: without reclaim, the retry would see
// the lock held by its own run and give up (or wait behind it until its
// lease expires).

// ownEntry tells whether kv is an entry that this run (o.RunID) wrote under
// a lease in an earlier try.
func ownEntry(kv *mvccpb.KeyValue, o backend.AcquireOptions) bool {
	if o.RunID == "" || kv.Lease == int64(clientv3.NoLease) {
		return false
	}
	var h holderInfo
	return json.Unmarshal(kv.Value, &h) == nil && h.RunID == o.RunID
}

// reclaim takes over kv, the holding entry that this run wrote in an
// earlier try, for a lock of limit (1, or a semaphore's). One keep-alive
// restarts its lease's TTL, and the lease's Start is when that was sent
// (see restartTTL), so the deadline never counts from the lost try's
// grant; the token stays the one written in the entry. It fails with
// errEvicted when the lease or the entry went away meanwhile, when the
// entry is not among the limit oldest by create revision (a key written
// by hand to look like it, named first), or when the lease was granted
// less than ttl (then it is revoked): the caller queues afresh.
func (b *Backend) reclaim(ctx context.Context, key string, kv *mvccpb.KeyValue, limit int, ttl time.Duration) (*lease, error) {
	e := entry{key: key, name: string(kv.Key), id: clientv3.LeaseID(kv.Lease), rev: kv.CreateRevision, token: entryToken(kv)}
	if err := b.restartTTL(ctx, &e, "renewing this run's earlier lease"); err != nil {
		return nil, err
	}
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Get(rctx, b.queuePrefix(key), firstN(limit, clientv3.WithKeysOnly())...)
	if err != nil {
		return nil, b.failed(ctx, "reading this run's earlier entry", key, err)
	}
	holds := slices.ContainsFunc(resp.Kvs, func(h *mvccpb.KeyValue) bool {
		return string(h.Key) == e.name && h.CreateRevision == e.rev
	})
	if e.ttl < ttl || !holds {
		b.revoke(ctx, e.id) // too short to honour the retry, or holding nothing
		return nil, errEvicted
	}
	return b.newLease(e), nil
}
