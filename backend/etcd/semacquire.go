package etcd

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/lockrun/lockrun/backend"
)

// acquireSem takes one of the o.Limit slots of key. Its entry is written
// whatever the queue holds (unless another limit's entries are there),
// in the transaction that reads the oldest entries: the entry holds a slot
// when it is among them. Without o.Wait an entry that holds none is
// revoked at once and the semaphore reported full; with o.Wait it waits
// for a slot as waitSlot says. An entry lost while waiting queues again
// at the back, as for a plain lock.
func (b *Backend) acquireSem(ctx context.Context, key string, o backend.AcquireOptions) (*lease, error) {
	for try := 0; ; try++ {
		e, err := b.grant(ctx, key, o.TTL)
		if err != nil {
			return nil, err
		}
		l, err := b.takeSlot(ctx, &e, o)
		if err == nil {
			if l.e.id != e.id {
				b.revoke(ctx, e.id) // this run's earlier entry holds a slot
			}
			l.minHold = o.MinHold
			return l, nil
		}
		b.revoke(ctx, e.id)
		if !errors.Is(err, errEvicted) || ctx.Err() != nil || !o.Wait && try > 0 {
			return nil, err
		}
	}
}

// takeSlot queues e and returns its lease once it holds a slot; without
// o.Wait it fails at once with a *backend.HeldError when the slots are
// taken. A slot held by this run's earlier try (see reclaim) is taken over
// instead, so that a retry never takes a second one.
func (b *Backend) takeSlot(ctx context.Context, e *entry, o backend.AcquireOptions) (*lease, error) {
	first, err := b.semEnqueue(ctx, e, o)
	if err != nil {
		return nil, err
	}
	if own := earlierTry(first, e, o); own != nil {
		return b.reclaim(ctx, e.key, own, o.EffectiveLimit(), o.TTL)
	}
	if holdsSlot(first, e) {
		return b.newLease(*e), nil
	}
	if !o.Wait {
		return nil, &backend.HeldError{Status: b.semStatus(e.key, o.EffectiveLimit(), first)}
	}
	return b.waitSlot(ctx, e, o.EffectiveLimit())
}

// holdsSlot tells whether e's entry is among the oldest entries first.
func holdsSlot(first []*mvccpb.KeyValue, e *entry) bool {
	for _, kv := range first {
		if kv.CreateRevision == e.rev && string(kv.Key) == e.name {
			return true
		}
	}
	return false
}

// earlierTry is the entry among the holders first that this run wrote in
// an earlier try, if any.
func earlierTry(first []*mvccpb.KeyValue, e *entry, o backend.AcquireOptions) *mvccpb.KeyValue {
	for _, kv := range first {
		if string(kv.Key) != e.name && ownEntry(kv, o) {
			return kv
		}
	}
	return nil
}
