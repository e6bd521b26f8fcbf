package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
)

// holderInfo is the value of a queue entry.
type holderInfo struct {
	Holder string             `json:"holder,omitempty"`
	RunID  string             `json:"run_id,omitempty"`
	Token  backend.Token      `json:"token,omitempty,string"` // none in etcdctl lock's entries
	Info   backend.HolderInfo `json:"info,omitzero"`
	// At is when the entry was written, Since when it was found to hold
	// the lock after waiting (see mark), both in µs since the epoch on the
	// writer's clock; an entry that held at once has At only.
	At    int64 `json:"at,omitempty"`
	Since int64 `json:"since,omitempty"`
}

// entry is one contender's place in a key's queue.
type entry struct {
	key   string // the lock key
	name  string // the etcd key of the entry
	id    clientv3.LeaseID
	ttl   time.Duration // as granted
	start time.Time     // sent time of the grant
	rev   int64         // the entry's create revision: its place in the queue
	token backend.Token // the fencing token written in the entry
}

// Acquire grants a lease of the TTL rounded up to whole seconds (etcd's
// unit; the server may raise it to its minimum) and queues an entry under
// it. Without o.Wait the entry is only written when the queue is empty,
// in the same transaction that checks it; with o.Wait it waits its turn.
// Either way, a lock held by an entry of the same RunID, left by an
// earlier try whose reply was lost, is taken over (see reclaim). A limit
// above 1 takes a semaphore's slot instead (see acquireSem).
func (b *Backend) Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	if err := backend.ValidateRequest(key, o); err != nil {
		return nil, err
	}
	if o.EffectiveLimit() > 1 {
		l, err := b.acquireSem(ctx, key, o)
		if err != nil {
			return nil, err // not a nil *lease in a non-nil Lease
		}
		return l, nil
	}
	if o.Wait {
		l, err := b.acquireWaiting(ctx, key, o)
		if err != nil {
			return nil, err
		}
		l.minHold = o.MinHold
		return l, nil
	}
	e, err := b.grant(ctx, key, o.TTL)
	if err != nil {
		return nil, err
	}
	l, err := b.take(ctx, &e, o)
	if err != nil || l.e.id != e.id {
		b.revoke(ctx, e.id) // unused: the lock is held, or an earlier try's lease holds it
	}
	if err != nil {
		return nil, err
	}
	l.minHold = o.MinHold
	return l, nil
}

// take writes e's entry if the queue is empty. When this run's earlier
// entry holds the lock, it takes that over; should the entry go away
// meanwhile, the queue may be empty now, so take tries once more.
func (b *Backend) take(ctx context.Context, e *entry, o backend.AcquireOptions) (*lease, error) {
	for range 2 {
		holder, err := b.enqueue(ctx, e, o, false)
		switch {
		case err != nil:
			return nil, err
		case holder == nil:
			return b.newLease(*e), nil
		case !ownEntry(holder, o):
			return nil, &backend.HeldError{Status: b.status(e.key, holder)}
		}
		if l, err := b.reclaim(ctx, e.key, holder, 1, o.TTL); !errors.Is(err, errEvicted) {
			return l, err
		}
	}
	return nil, b.unavailable("taking the lock", e.key, errEvicted)
}

// grant asks for a lease; its TTL starts on the server after start.
func (b *Backend) grant(ctx context.Context, key string, ttl time.Duration) (entry, error) {
	secs := max(int64(math.Ceil(ttl.Seconds())), 1)
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	start := time.Now()
	resp, err := b.cli.Grant(rctx, secs)
	if err != nil {
		return entry{}, b.failed(ctx, "granting a lease", key, err)
	}
	return entry{key: key, id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, start: start}, nil
}

// enqueue writes e's entry with the next token (see enqueueTxn), in one
// transaction in the usual case. Unless always, it writes only when no
// entry exists. It returns the oldest entry when that is not e's (the
// holder), or nil when e holds; a *backend.LimitError when the key is a
// semaphore's.
func (b *Backend) enqueue(ctx context.Context, e *entry, o backend.AcquireOptions, always bool) (*mvccpb.KeyValue, error) {
	var last backend.Token
	ordered := true
	for range tokenTries {
		tok, err := nextToken(last, time.Now())
		if err != nil {
			return nil, fmt.Errorf("%s: lock %q: %w", b.addr, e.key, err)
		}
		val, err := json.Marshal(holderInfo{Holder: o.Holder, RunID: o.RunID, Token: tok, Info: o.Info, At: time.Now().UnixMicro()})
		if err != nil {
			return nil, err
		}
		e.name = b.entryName(e.key, tok, e.id, ordered)
		r, err := b.enqueueTxn(ctx, e, val, tok, always)
		switch {
		case err != nil:
			return nil, b.failed(ctx, "taking the lock", e.key, err)
		case !r.written && r.oldest != nil && b.entryLimit(e.key, string(r.oldest.Key)) != 1:
			return nil, b.limitError(e.key, 1, r.oldest) // a semaphore's entries come first
		case r.written:
			e.rev, e.token = r.rev, tok
			if r.oldest != nil && r.oldest.CreateRevision != e.rev {
				return r.oldest, nil
			}
			return nil, nil
		case r.oldest != nil && !always:
			return r.oldest, nil
		case r.counter == nil && r.after == nil:
			return nil, b.unavailable("taking the lock", e.key, errors.New("the token counter vanished"))
		}
		// The counter, or an entry named after ours, is at or above our
		// clock: count on from the higher.
		if last, ordered, err = b.countOn(e.key, r); err != nil {
			return nil, b.unavailable("issuing a token", e.key, err)
		}
	}
	return nil, b.unavailable("issuing a token", e.key, fmt.Errorf("the token counter moved on %d times in a row", tokenTries))
}

// status describes a key held by the entry kv.
func (b *Backend) status(key string, kv *mvccpb.KeyValue) backend.Status {
	var h holderInfo
	_ = json.Unmarshal(kv.Value, &h) // entries of etcdctl lock are empty
	st := backend.Status{Key: key, Held: true, Holder: h.Holder, RunID: h.RunID, Token: entryToken(kv), Info: h.Info}
	if since := max(h.Since, h.At); since > 0 {
		st.Since = time.UnixMicro(since)
	}
	return st
}

// revoke drops a lease that will not be used, with its entry if any, even
// when ctx is over; if that fails the lease expires by itself.
func (b *Backend) revoke(ctx context.Context, id clientv3.LeaseID) {
	rctx, cancel := b.bounded(context.WithoutCancel(ctx))
	defer cancel()
	_, _ = b.cli.Revoke(rctx, id)
}

// failed wraps err from a request made under ctx: the caller's own
// cancellation or deadline is returned as its cause, so that a waiter
// that gives up reports why; anything else is unavailable.
func (b *Backend) failed(ctx context.Context, op, key string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return fmt.Errorf("%s: lock %q: %s: %w", b.addr, key, op, cause)
	}
	return b.unavailable(op, key, err)
}
