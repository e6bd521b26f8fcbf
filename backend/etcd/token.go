package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
)

// A key's token counter (counterKey) holds the last token handed out or
// reserved for it, in tokenDigits zero-padded decimal digits, so that
// etcd's byte-wise Compare orders counters as numbers. Earlier versions
// of lockrun wrote it empty (their tokens were revisions): that sorts, and
// reads, as 0.
const tokenDigits = 20 // math.MaxUint64 has 20

// formatToken is t as the counter stores it.
func formatToken(t backend.Token) string { return fmt.Sprintf("%0*d", tokenDigits, uint64(t)) }

// parseCounter reads the counter kv; an empty value is 0.
func parseCounter(kv *mvccpb.KeyValue) (backend.Token, error) {
	if len(kv.Value) == 0 {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(kv.Value), 10, 64)
	if err != nil || len(kv.Value) != tokenDigits {
		return 0, fmt.Errorf("token counter %s holds %q, not a token written by lockrun", kv.Key, kv.Value)
	}
	return backend.Token(n), nil
}

// nextToken is the token to ask for after last: the wall clock in
// microseconds at now, or last+1 when last is not below it (a clock
// behind the host that issued last). Past math.MaxUint64 it fails with
// backend.ErrTokenRange.
func nextToken(last backend.Token, now time.Time) (backend.Token, error) {
	if last == math.MaxUint64 {
		return 0, fmt.Errorf("%w: the last token is %d", backend.ErrTokenRange, last)
	}
	return max(last+1, backend.ClockToken(now)), nil
}

// tokenTries bounds how often enqueue counts on from a counter that
// another grant, or a host with a clock ahead of ours, moved past the
// token we asked for: each try is one more round trip.
const tokenTries = 16

// entryToken is the token written in a queue entry. etcdctl lock's
// entries carry none: theirs is the create revision (its ETCD_LOCK_REV).
func entryToken(kv *mvccpb.KeyValue) backend.Token {
	var h holderInfo
	if json.Unmarshal(kv.Value, &h) == nil && h.Token != 0 {
		return h.Token
	}
	return backend.Token(kv.CreateRevision)
}

// enqueued is what enqueueTxn (or semEnqueueTxn) found: whether it wrote
// the entry (at revision rev), the oldest entry (a semaphore's first
// entries), and, when it did not write, the token counter (and an entry
// of another limit than the semaphore's).
type enqueued struct {
	written         bool
	rev             int64
	oldest, counter *mvccpb.KeyValue
	after           *mvccpb.KeyValue // the last entry named after the one to write
	first           []*mvccpb.KeyValue
	other           *mvccpb.KeyValue
}

// enqueueTxn writes e's entry (value val, with token tok, named for it:
// see entryName) and sets the token counter to tok, in one transaction,
// only while the counter is below tok and no entry is named at or after
// e's; unless always, only while no entry exists, and if always, only
// while no semaphore's entry exists (see otherLimits). The token is thus
// never below the wall clock when the lock was asked for (nextToken) and
// strictly above every token issued or reserved before for the key, since
// the counter only grows: a wiped cluster has no counter, and starts again
// from the clock. A missing key fails every Value compare, so the Else
// branch holds the same write for a counter that does not exist (a new
// key, or a wiped cluster): one round trip either way.
func (b *Backend) enqueueTxn(ctx context.Context, e *entry, val []byte, tok backend.Token, always bool) (enqueued, error) {
	pfx, counter := b.queuePrefix(e.key), b.counterKey(e.key)
	free := b.otherLimits(e.key, 1) // a waiter queues behind plain entries only
	if !always {
		free = []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(pfx), "=", 0).WithPrefix()}
	}
	if b.ordered(e) {
		free = append(free, clientv3.Compare(clientv3.CreateRevision(e.name), "=", 0).WithRange(prefixEnd(pfx)))
	}
	above := append(slices.Clone(free), clientv3.Compare(clientv3.Value(counter), "<", formatToken(tok)))
	fresh := append(slices.Clone(free), clientv3.Compare(clientv3.Version(counter), "=", 0))
	oldest := clientv3.OpGet(pfx, clientv3.WithPrefix(), clientv3.WithLimit(1)) // named first: see oldestAt
	after := clientv3.OpGet(e.name, clientv3.WithRange(prefixEnd(pfx)), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
	write := []clientv3.Op{
		clientv3.OpPut(e.name, string(val), clientv3.WithLease(e.id)),
		clientv3.OpPut(counter, formatToken(tok)),
		oldest,
	}
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Txn(rctx).If(above...).Then(write...).
		Else(clientv3.OpTxn(fresh, write, []clientv3.Op{oldest, clientv3.OpGet(counter), after})).
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
		r.oldest = firstKV(rs[2])
	} else {
		r.oldest, r.counter, r.after = firstKV(rs[0]), firstKV(rs[1]), firstKV(rs[2])
	}
	if r.oldest, err = b.oldestAt(ctx, e, r.written, r.oldest, r.rev); err != nil {
		return enqueued{}, err
	}
	return r, nil
}

// oldestAt is the oldest entry of e's queue at revision rev, given first,
// the entry named first there; written says that rev created e's entry.
// An entry named for its token has every older entry named before it (see
// entryTag), so when first is lockrun's, it is the oldest: one entry read,
// where the oldest by create revision is a read of the whole queue, which
// etcd sorts. Otherwise (etcdctl lock's entry, an earlier build's, a
// semaphore's) it reads that, at rev, or, when etcd cannot serve rev any
// more (compacted), now, and then only while e's entry, if written, is
// still there (else errEvicted).
func (b *Backend) oldestAt(ctx context.Context, e *entry, written bool, first *mvccpb.KeyValue, rev int64) (*mvccpb.KeyValue, error) {
	if first == nil || b.lockrunEntry(e.key, first) {
		return first, nil
	}
	pfx := b.queuePrefix(e.key)
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Get(rctx, pfx, append(clientv3.WithFirstCreate(), clientv3.WithRev(rev))...)
	if err == nil {
		if len(resp.Kvs) == 0 {
			return nil, nil
		}
		return resp.Kvs[0], nil
	}
	var own []clientv3.Cmp
	if written {
		own = append(own, clientv3.Compare(clientv3.CreateRevision(e.name), "=", rev))
	}
	tr, err := b.cli.Txn(rctx).If(own...).Then(clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)).Commit()
	switch {
	case err != nil:
		return nil, err
	case !tr.Succeeded:
		return nil, fmt.Errorf("%s: lock %q: %w", b.addr, e.key, errEvicted)
	}
	return firstKV(tr.Responses[0]), nil
}

// lockrunEntry tells whether kv is a plain lock's entry as enqueueTxn
// writes them: named for its token, under a lease, with that token in its
// value.
func (b *Backend) lockrunEntry(key string, kv *mvccpb.KeyValue) bool {
	t, ok := b.nameToken(key, string(kv.Key))
	return ok && kv.Lease != int64(clientv3.NoLease) && entryToken(kv) == t
}

// A plain lock's entry is named for its token and its lease:
// P K/t<token in tokenDigits digits>-<lease id in hex>. entryTag sorts
// after the hex digits of a lease id (the names of etcdctl lock's and
// older lockruns' entries) and after semTag, and enqueueTxn writes such
// an entry only while none is named at or after it, so every entry older
// than one of these (by create revision) is named before it: its waiter
// reads the entries named up to its own rather than the whole queue,
// which makes its turn's read as cheap with a thousand waiting as with
// one. A key not of lockrun's under the prefix that sorts after entryTag
// (another deployment's prefix nested in this one) would stop those
// writes: an entry then takes the lease's name, as older builds did, and
// its waiter reads the whole queue (see ordered).
const entryTag = "t"

// entryName is the name of key's entry with token tok and lease id, or,
// unless ordered, the lease's alone.
func (b *Backend) entryName(key string, tok backend.Token, id clientv3.LeaseID, ordered bool) string {
	if !ordered {
		return fmt.Sprintf("%s%x", b.queuePrefix(key), int64(id))
	}
	return fmt.Sprintf("%s%s%s-%x", b.queuePrefix(key), entryTag, formatToken(tok), int64(id))
}

// ordered tells whether e's entry is named for its token, so that every
// older entry is named before it.
func (b *Backend) ordered(e *entry) bool {
	return strings.HasPrefix(e.name, b.queuePrefix(e.key)+entryTag)
}

// nameToken is the token in the name of a plain lock's entry of key.
func (b *Backend) nameToken(key, name string) (backend.Token, bool) {
	rest, ok := strings.CutPrefix(name, b.queuePrefix(key)+entryTag)
	if !ok || len(rest) <= tokenDigits || rest[tokenDigits] != '-' {
		return 0, false
	}
	t, err := strconv.ParseUint(rest[:tokenDigits], 10, 64)
	return backend.Token(t), err == nil
}

// countOn is the token to count on from after a write that r says failed:
// the higher of the counter's and the token in the name of the last entry
// named after the one tried (a counter set back by hand, or deleted). It
// reports whether entries may still be named for their tokens: not when
// that last entry is not lockrun's, or holds the last token there is.
func (b *Backend) countOn(key string, r enqueued) (backend.Token, bool, error) {
	var last backend.Token
	if r.counter != nil {
		t, err := parseCounter(r.counter)
		if err != nil {
			return 0, false, err
		}
		last = t
	}
	if r.after == nil {
		return last, true, nil
	}
	t, ok := b.nameToken(key, string(r.after.Key))
	if !ok || t == math.MaxUint64 {
		return last, false, nil
	}
	return max(last, t), true, nil
}

// firstKV is the first key a range answer holds, or nil.
func firstKV(op *pb.ResponseOp) *mvccpb.KeyValue {
	if kvs := op.GetResponseRange().Kvs; len(kvs) > 0 {
		return kvs[0]
	}
	return nil
}
