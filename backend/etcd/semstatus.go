package etcd

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.HolderReleaser = (*Backend)(nil)

// holdersAt reads the limit oldest entries of key's queue as they were at
// revision rev: a semaphore's holders, consistent with the read that found
// its limit.
func (b *Backend) holdersAt(ctx context.Context, key string, limit int, rev int64) ([]*mvccpb.KeyValue, error) {
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Get(rctx, b.queuePrefix(key), firstN(limit, clientv3.WithRev(rev))...)
	if err != nil {
		return nil, b.failed(ctx, "reading the lock", key, err)
	}
	return resp.Kvs, nil
}

// inspectSem describes key, a semaphore of limit, as of revision rev, at
// which the entries named in revoked were revoked.
func (b *Backend) inspectSem(ctx context.Context, key string, limit int, rev int64, revoked map[string]bool) (backend.Status, error) {
	holders, err := b.holdersAt(ctx, key, limit, rev)
	if err != nil || len(holders) == 0 {
		return backend.Status{Key: key}, err
	}
	st := b.semStatus(key, limit, holders)
	withRevoked(&st, holders, revoked)
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	b.withLeaseTimes(rctx, &st, holders)
	return st, nil
}

// breakSem breaks every holder of key, a semaphore of limit, as they were
// at revision rev, in one transaction that deletes their entries: each
// holder's next renewal finds its entry gone (ErrLost), and the waiters
// take the slots. An entry's name is its lease's id, which etcd never
// reuses, so a deletion by name removes only that holder.
func (b *Backend) breakSem(ctx context.Context, key string, limit int, rev int64) error {
	holders, err := b.holdersAt(ctx, key, limit, rev)
	if err != nil {
		return err
	}
	var del []clientv3.Op
	for _, kv := range holders {
		del = append(del, clientv3.OpDelete(string(kv.Key)))
	}
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	if _, err := b.cli.Txn(rctx).Then(del...).Commit(); err != nil {
		return b.failed(ctx, "breaking the lock", key, err)
	}
	return nil
}

// ReleaseHolder breaks the holder of key whose token is token: a plain
// lock's holder, or one of a semaphore's (its limit oldest entries). One
// transaction deletes that entry if it still has the create revision it
// was read with, then its lease is revoked, so that its next renewal
// fails either way. The token counter is left alone.
func (b *Backend) ReleaseHolder(ctx context.Context, key string, token backend.Token) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Get(rctx, b.queuePrefix(key), clientv3.WithFirstCreate()...)
	if err != nil {
		return b.failed(ctx, "reading the lock", key, err)
	}
	holders := resp.Kvs
	if len(holders) > 0 {
		if limit := b.entryLimit(key, string(holders[0].Key)); limit > 1 {
			if holders, err = b.holdersAt(ctx, key, limit, resp.Header.Revision); err != nil {
				return err
			}
		}
	}
	for _, kv := range holders {
		if entryToken(kv) == token {
			return b.breakEntry(ctx, key, kv, token)
		}
	}
	return b.lost(key, fmt.Sprintf("no holder has token %d", token))
}

// breakEntry deletes the holder's entry kv, owner-checked by its create
// revision, then revokes its lease.
func (b *Backend) breakEntry(ctx context.Context, key string, kv *mvccpb.KeyValue, token backend.Token) error {
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision)).
		Then(clientv3.OpDelete(string(kv.Key))).
		Commit()
	if err != nil {
		return b.failed(ctx, "breaking the lock", key, err)
	}
	if !resp.Succeeded {
		return b.lost(key, fmt.Sprintf("the holder of token %d left meanwhile", token))
	}
	if kv.Lease != int64(clientv3.NoLease) {
		b.revoke(ctx, clientv3.LeaseID(kv.Lease))
	}
	return nil
}
