package etcd

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
)

// Inspect reads the oldest entry, the token counter and the key's
// revocation markers in one transaction, then the holder's lease time left; for a semaphore, its
// holders (the limit oldest entries, read at the same revision) and their
// leases' time left. A free key reports the last token issued for it (0
// when never taken).
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Status, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Status{}, err
	}
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Txn(rctx).Then(
		clientv3.OpGet(b.queuePrefix(key), clientv3.WithFirstCreate()...),
		clientv3.OpGet(b.counterKey(key)),
		clientv3.OpGet(b.revokedPrefix(key), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return backend.Status{Key: key}, b.failed(ctx, "reading the lock", key, err)
	}
	holder := resp.Responses[0].GetResponseRange().Kvs
	if len(holder) == 0 {
		st := backend.Status{Key: key}
		if counter := firstKV(resp.Responses[1]); counter != nil {
			tok, err := parseCounter(counter)
			if err != nil {
				return st, b.unavailable("reading the lock", key, err)
			}
			st.Token = tok
		}
		return st, nil
	}
	revoked := b.revokedNames(key, resp.Responses[2].GetResponseRange().Kvs)
	if limit := b.entryLimit(key, string(holder[0].Key)); limit > 1 {
		return b.inspectSem(ctx, key, limit, resp.Header.Revision, revoked)
	}
	st := b.status(key, holder[0])
	withRevoked(&st, holder, revoked)
	b.addLeaseTime(rctx, &st, clientv3.LeaseID(holder[0].Lease))
	return st, nil
}

// ForceRelease revokes the holder's lease, which deletes its entry: the
// next in line takes over, and the holder's next renewal finds its lease
// gone (ErrLost); a semaphore's holders are broken all at once (see
// breakSem). The token counter is left alone, so the next grant's token
// is still higher.
func (b *Backend) ForceRelease(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Get(rctx, b.queuePrefix(key), clientv3.WithFirstCreate()...)
	if err != nil {
		return b.failed(ctx, "reading the lock", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	kv := resp.Kvs[0]
	if limit := b.entryLimit(key, string(kv.Key)); limit > 1 {
		return b.breakSem(ctx, key, limit, resp.Header.Revision)
	}
	if kv.Lease == int64(clientv3.NoLease) { // written by hand, without a lease
		_, err = b.cli.Txn(rctx).
			If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).
			Then(clientv3.OpDelete(string(kv.Key))).
			Commit()
	} else {
		_, err = b.cli.Revoke(rctx, clientv3.LeaseID(kv.Lease))
	}
	if err != nil && !isLeaseGone(err) {
		return b.failed(ctx, "breaking the lock", key, err)
	}
	return nil
}
