package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
)

// A semaphore of limit N > 1 queues in the same prefix as the plain lock,
// under a name that carries its limit:
//
//	P K/limit-NNNN/<lease id in hex>
//
// (NNNN zero-padded, so that the entries of one limit are one contiguous
// key range). An entry holds a slot while fewer than N entries of the
// prefix are older (by create revision) than it. The entries of a plain
// lock are P K/t<token>-<lease id>, an older lockrun's and etcdctl lock's
// P K/<lease id>: the limit is in the name so that the transaction that
// queues an entry can check, with range compares, that no entry of
// another limit exists, in the same atomic step that writes it and issues
// its token.

// semTag starts the name of a semaphore's entry after the queue prefix.
const semTag = "limit-"

// semPrefix is where key's entries of limit live.
func (b *Backend) semPrefix(key string, limit int) string {
	return fmt.Sprintf("%s%s%04d/", b.queuePrefix(key), semTag, limit)
}

// prefixEnd is the first key after every key that starts with p.
func prefixEnd(p string) string { return clientv3.GetPrefixRangeEnd(p) }

// entryLimit is the limit of the queue entry named name under key's
// prefix: the one in a semaphore's name, else 1 (a plain lock's entry, or
// one lockrun did not write).
func (b *Backend) entryLimit(key, name string) int {
	rest, ok := strings.CutPrefix(name, b.queuePrefix(key)+semTag)
	if !ok {
		return 1
	}
	digits, _, _ := strings.Cut(rest, "/")
	n, err := strconv.Atoi(digits)
	if err != nil || n < 2 || n > backend.MaxLimit {
		return 1
	}
	return n
}

// otherLimits are the compares, for one transaction, that hold when no
// entry of key's queue has another limit than limit.
func (b *Backend) otherLimits(key string, limit int) []clientv3.Cmp {
	pfx := b.queuePrefix(key)
	if limit == 1 {
		sem := pfx + semTag
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(sem), "=", 0).WithRange(prefixEnd(sem))}
	}
	own := b.semPrefix(key, limit)
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithRange(own),
		clientv3.Compare(clientv3.CreateRevision(prefixEnd(own)), "=", 0).WithRange(prefixEnd(pfx)),
	}
}

// otherLimitGets read, for a transaction whose otherLimits failed, the
// first entry below and above key's entries of limit.
func (b *Backend) otherLimitGets(key string, limit int) []clientv3.Op {
	pfx, own := b.queuePrefix(key), b.semPrefix(key, limit)
	return []clientv3.Op{
		clientv3.OpGet(pfx, clientv3.WithRange(own), clientv3.WithLimit(1), clientv3.WithKeysOnly()),
		clientv3.OpGet(prefixEnd(own), clientv3.WithRange(prefixEnd(pfx)), clientv3.WithLimit(1), clientv3.WithKeysOnly()),
	}
}

// limitError reports that key is in use with the limit of its entry kv.
func (b *Backend) limitError(key string, want int, kv *mvccpb.KeyValue) error {
	return fmt.Errorf("%s: %w", b.addr, &backend.LimitError{Key: key, Want: want, Have: b.entryLimit(key, string(kv.Key))})
}

// firstN reads a queue's n oldest entries, the holders of a semaphore
// of limit n, from its prefix.
func firstN(n int, more ...clientv3.OpOption) []clientv3.OpOption {
	return append([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(int64(n))}, more...)
}

// semEnqueueTxn writes e's entry (value val, token tok) and the token
// counter, as enqueueTxn does for a plain lock, while no entry of another
// limit than limit exists: one transaction, whose answer has the key's
// limit oldest entries when it wrote (e's among them when e holds a slot),
// and else the counter and an entry of another limit, if any.
func (b *Backend) semEnqueueTxn(ctx context.Context, e *entry, val []byte, tok backend.Token, limit int) (enqueued, error) {
	counter := b.counterKey(e.key)
	same := b.otherLimits(e.key, limit)
	above := append(slices.Clone(same), clientv3.Compare(clientv3.Value(counter), "<", formatToken(tok)))
	fresh := append(slices.Clone(same), clientv3.Compare(clientv3.Version(counter), "=", 0))
	write := []clientv3.Op{
		clientv3.OpPut(e.name, string(val), clientv3.WithLease(e.id)),
		clientv3.OpPut(counter, formatToken(tok)),
		clientv3.OpGet(b.queuePrefix(e.key), firstN(limit)...),
	}
	refused := append([]clientv3.Op{clientv3.OpGet(counter)}, b.otherLimitGets(e.key, limit)...)
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Txn(rctx).If(above...).Then(write...).
		Else(clientv3.OpTxn(fresh, write, refused)).
		Commit()
	if err != nil {
		return enqueued{}, err
	}
	r := enqueued{written: resp.Succeeded, rev: resp.Header.Revision}
	rs := resp.Responses
	if !r.written {
		nested := rs[0].GetResponseTxn()
		r.written, rs = nested.Succeeded, nested.Responses
	}
	if r.written {
		r.first = rs[2].GetResponseRange().Kvs
		return r, nil
	}
	r.counter = firstKV(rs[0])
	if r.other = firstKV(rs[1]); r.other == nil {
		r.other = firstKV(rs[2])
	}
	return r, nil
}

// semEnqueue queues e's entry for a semaphore of o's limit with the next
// token, retrying while the counter is ahead as enqueue does. It returns
// the key's limit oldest entries as the write left them, or a
// *backend.LimitError when the key is in use with another limit.
func (b *Backend) semEnqueue(ctx context.Context, e *entry, o backend.AcquireOptions) ([]*mvccpb.KeyValue, error) {
	limit := o.EffectiveLimit()
	e.name = fmt.Sprintf("%s%x", b.semPrefix(e.key, limit), int64(e.id))
	var last backend.Token
	for range tokenTries {
		tok, err := nextToken(last, time.Now())
		if err != nil {
			return nil, fmt.Errorf("%s: lock %q: %w", b.addr, e.key, err)
		}
		val, err := json.Marshal(holderInfo{Holder: o.Holder, RunID: o.RunID, Token: tok, Info: o.Info, At: time.Now().UnixMicro()})
		if err != nil {
			return nil, err
		}
		r, err := b.semEnqueueTxn(ctx, e, val, tok, limit)
		switch {
		case err != nil:
			return nil, b.failed(ctx, "taking the lock", e.key, err)
		case r.written:
			e.rev, e.token = r.rev, tok
			return r.first, nil
		case r.other != nil:
			return nil, b.limitError(e.key, limit, r.other)
		case r.counter == nil:
			return nil, b.unavailable("taking the lock", e.key, fmt.Errorf("the token counter vanished"))
		}
		if last, err = parseCounter(r.counter); err != nil {
			return nil, b.unavailable("issuing a token", e.key, err)
		}
	}
	return nil, b.unavailable("issuing a token", e.key, fmt.Errorf("the token counter moved on %d times in a row", tokenTries))
}

// semStatus describes key held by the entries holders (oldest first) as a
// semaphore of limit.
func (b *Backend) semStatus(key string, limit int, holders []*mvccpb.KeyValue) backend.Status {
	all := make([]backend.Status, len(holders))
	for i, kv := range holders {
		all[i] = b.status(key, kv)
	}
	st := all[0]
	st.Limit, st.Holders = limit, all
	return st
}

// withLeaseTimes fills the TTL and Renewed of st and of each of its
// holders, whose entries are kvs.
func (b *Backend) withLeaseTimes(ctx context.Context, st *backend.Status, kvs []*mvccpb.KeyValue) {
	for i, kv := range kvs {
		b.addLeaseTime(ctx, &st.Holders[i], clientv3.LeaseID(kv.Lease))
	}
	h := st.Holders[0]
	st.TTL, st.Renewed = h.TTL, h.Renewed
}
