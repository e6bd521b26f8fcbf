package etcd

import (
	"context"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.Revoker = (*Backend)(nil)

// A revoked holder's entry stays where it is, on its lease, so that its
// lock or slot stays taken; beside it a marker says it was revoked:
//
//	P.revoked/K/<entry name under P K/>   (P without its trailing "/")
//
// The marker is attached to the entry's own lease, so it goes with the
// lease (a release revokes it, just after the entry's delete, or it
// expires) and is never left behind for longer than a TTL. It lives beside the prefix, as the checkpoints do, so
// that no queue prefix contains it: waiters and etcdctl lock never see it.
// The holder's renewal reads it in the transaction that already reads its
// entry; an entry without a marker (every older lockrun's) is not revoked.

// markersRoot is the prefix of every key's revocation markers.
func (b *Backend) markersRoot() string { return strings.TrimSuffix(b.cfg.Prefix, "/") + ".revoked/" }

// revokedPrefix is where key's revocation markers live.
func (b *Backend) revokedPrefix(key string) string { return b.markersRoot() + key + "/" }

// markerName is the revocation marker of key's queue entry named name.
func (b *Backend) markerName(key, name string) string {
	return b.revokedPrefix(key) + strings.TrimPrefix(name, b.queuePrefix(key))
}

// revokeTries bounds the reads and marks of a Revoke of every holder whose
// holders keep changing under it.
const revokeTries = 3

// Revoke marks key's holder whose token is token (every holder when token
// is 0) revoked: one transaction writes each one's marker, attached to its
// lease, while its entry still has the create revision it was read with.
// Nothing else changes: the entries, their leases and the token counter
// stay, so the lock or slot stays taken until the holder releases (which
// revokes its lease, taking entry and marker in one write) or its lease
// ends. A holder written by hand without a lease cannot be renewed, and is
// left alone.
func (b *Backend) Revoke(ctx context.Context, key string, token backend.Token) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	for range revokeTries {
		holders, err := b.holders(ctx, key)
		if err != nil {
			return err
		}
		targets := revokeTargets(holders, token)
		if len(targets) == 0 {
			if token == 0 {
				return nil
			}
			return b.lost(key, fmt.Sprintf("no holder has token %d", token))
		}
		done, err := b.markRevoked(ctx, key, targets)
		if err != nil || done {
			return err
		}
		if token != 0 {
			return b.lost(key, fmt.Sprintf("the holder of token %d left meanwhile", token))
		}
	}
	return b.unavailable("revoking", key, fmt.Errorf("the holders changed %d times in a row", revokeTries))
}

// holders reads key's holders: the oldest entry of a plain lock, the limit
// oldest of a semaphore (read at the same revision).
func (b *Backend) holders(ctx context.Context, key string) ([]*mvccpb.KeyValue, error) {
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Get(rctx, b.queuePrefix(key), clientv3.WithFirstCreate()...)
	if err != nil {
		return nil, b.failed(ctx, "reading the lock", key, err)
	}
	if len(resp.Kvs) > 0 {
		if limit := b.entryLimit(key, string(resp.Kvs[0].Key)); limit > 1 {
			return b.holdersAt(ctx, key, limit, resp.Header.Revision)
		}
	}
	return resp.Kvs, nil
}

// revokeTargets are the holders with token (all when token is 0) that
// have a lease to attach a marker to.
func revokeTargets(holders []*mvccpb.KeyValue, token backend.Token) []*mvccpb.KeyValue {
	var out []*mvccpb.KeyValue
	for _, kv := range holders {
		if kv.Lease != int64(clientv3.NoLease) && (token == 0 || entryToken(kv) == token) {
			out = append(out, kv)
		}
	}
	return out
}

// markRevoked writes the markers of the entries targets in one
// transaction, if none of them changed since it was read; it reports
// whether it wrote.
func (b *Backend) markRevoked(ctx context.Context, key string, targets []*mvccpb.KeyValue) (bool, error) {
	var same []clientv3.Cmp
	var mark []clientv3.Op
	for _, kv := range targets {
		same = append(same, clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision))
		mark = append(mark, clientv3.OpPut(b.markerName(key, string(kv.Key)), "", clientv3.WithLease(clientv3.LeaseID(kv.Lease))))
	}
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Txn(rctx).If(same...).Then(mark...).Commit()
	if err != nil {
		if isLeaseGone(err) { // a target's lease ended between the compare's read and now
			return false, nil
		}
		return false, b.failed(ctx, "revoking", key, err)
	}
	return resp.Succeeded, nil
}

// revokedNames reads the markers in kvs (keys under revokedPrefix) as the
// set of the queue entries they mark.
func (b *Backend) revokedNames(key string, kvs []*mvccpb.KeyValue) map[string]bool {
	names := map[string]bool{}
	for _, kv := range kvs {
		rest := strings.TrimPrefix(string(kv.Key), b.revokedPrefix(key))
		names[b.queuePrefix(key)+rest] = true
	}
	return names
}

// withRevoked sets Revoked in st (and its holders, whose entries are
// holders) for the entries that revoked names.
func withRevoked(st *backend.Status, holders []*mvccpb.KeyValue, revoked map[string]bool) {
	if len(st.Holders) == 0 {
		st.Revoked = len(holders) > 0 && revoked[string(holders[0].Key)]
		return
	}
	for i, kv := range holders {
		st.Holders[i].Revoked = revoked[string(kv.Key)]
	}
	st.Revoked = st.Holders[0].Revoked
}
