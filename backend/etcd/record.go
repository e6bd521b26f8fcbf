package etcd

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
)

// markOnce records in e's entry when it began to hold the lock, since, for
// a waiter whose entry was written long before its turn came. It adds
// "since" to the entry's value and keeps every other field as written (a
// read, then a write conditioned on the entry not having changed), sent
// once the command runs (lease.Started) so that it costs the hand-off
// nothing; until it lands, status shows the time the entry was queued. A
// mark that fails is only a less exact status. It reports whether it is
// done: the entry was written (by this or by another write), or is gone
// or not lockrun's.
func (b *Backend) markOnce(e entry, since int64) bool {
	ctx, cancel := b.bounded(context.Background())
	defer cancel()
	resp, err := b.cli.Get(ctx, e.name)
	if err != nil {
		return false
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != e.rev {
		return true
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(resp.Kvs[0].Value, &fields) != nil {
		return true
	}
	fields["since"], _ = json.Marshal(since)
	val, err := json.Marshal(fields)
	if err != nil {
		return true
	}
	_, err = b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(e.name), "=", resp.Kvs[0].ModRevision)).
		Then(clientv3.OpPut(e.name, string(val), clientv3.WithIgnoreLease())).
		Commit()
	return err == nil
}

// addLeaseTime fills st's TTL and Renewed from the holder's lease: etcd
// tells the TTL left and the TTL granted in whole seconds (the left one
// rounded down), so Renewed is at most a second early, and never before
// the grant.
func (b *Backend) addLeaseTime(ctx context.Context, st *backend.Status, id clientv3.LeaseID) {
	if id == clientv3.NoLease {
		return
	}
	ttl, err := b.cli.TimeToLive(ctx, id)
	if err != nil || ttl.TTL < 0 { // -1: expired meanwhile
		return
	}
	st.TTL = time.Duration(ttl.TTL) * time.Second
	st.Renewed = time.Now().Add(-time.Duration(ttl.GrantedTTL-ttl.TTL) * time.Second)
	if st.Renewed.Before(st.Since) {
		st.Renewed = st.Since
	}
}

// List reports the held locks whose key starts with prefix, sorted by key:
// one read of every entry and revocation marker under the prefix, then the
// holders' leases (a semaphore's limit oldest entries).
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Status, error) {
	if prefix != "" {
		if err := backend.ValidateKey(prefix); err != nil {
			return nil, err
		}
	}
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Txn(rctx).Then(
		clientv3.OpGet(b.cfg.Prefix+prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)),
		clientv3.OpGet(b.markersRoot()+prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, b.failed(ctx, "listing locks", prefix, err)
	}
	revoked := map[string]bool{} // names of revoked entries, of every key
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		key, rest, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), b.markersRoot()), "/")
		revoked[b.queuePrefix(key)+rest] = true
	}
	queues := map[string][]*mvccpb.KeyValue{} // lock key → its entries
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		key, _, isEntry := strings.Cut(strings.TrimPrefix(string(kv.Key), b.cfg.Prefix), "/")
		if !isEntry || backend.ValidateKey(key) != nil {
			continue // a token counter, or not lockrun's
		}
		queues[key] = append(queues[key], kv)
	}
	var held []backend.Status
	for key, kvs := range queues {
		held = append(held, b.queueStatus(rctx, key, kvs, revoked))
	}
	slices.SortFunc(held, func(a, b backend.Status) int { return strings.Compare(a.Key, b.Key) })
	return held, nil
}

// queueStatus describes key, whose queue holds the entries kvs, with the
// holders' lease times; the entries named in revoked were revoked.
func (b *Backend) queueStatus(ctx context.Context, key string, kvs []*mvccpb.KeyValue, revoked map[string]bool) backend.Status {
	slices.SortFunc(kvs, func(x, y *mvccpb.KeyValue) int { return cmp.Compare(x.CreateRevision, y.CreateRevision) })
	limit := b.entryLimit(key, string(kvs[0].Key))
	if limit == 1 {
		st := b.status(key, kvs[0])
		withRevoked(&st, kvs[:1], revoked)
		b.addLeaseTime(ctx, &st, clientv3.LeaseID(kvs[0].Lease))
		return st
	}
	holders := kvs[:min(limit, len(kvs))]
	st := b.semStatus(key, limit, holders)
	withRevoked(&st, holders, revoked)
	b.withLeaseTimes(ctx, &st, holders)
	return st
}
