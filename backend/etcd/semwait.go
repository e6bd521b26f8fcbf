package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// How a semaphore's waiters wait, without a herd. The holders release in
// any order, so the entry N places ahead is not the one to watch: the
// first waiter (exactly N entries older) watches the queue for deletions
// and counts its older entries down; every later waiter watches only the
// entry just ahead of it, for a deletion or a write. A waiter that gets
// a slot writes its entry at once (markSlot, the grant time of mark),
// which wakes the one behind it to become the first waiter. A release
// thus wakes the first waiter alone, and a grant the next one alone.

// waitSlot waits until fewer than limit entries are older than e's, then
// returns its lease: the lease is renewed while it waits, and one more
// keep-alive, sent beside the linearizable read that makes sure the slot
// is free, starts the holder's deadline (a plain lock's waitTurn may
// count from an earlier renewal instead).
func (b *Backend) waitSlot(ctx context.Context, e *entry, limit int) (*lease, error) {
	wctx, evict := context.WithCancelCause(ctx)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		b.keepQueued(wctx, e, nil, evict)
	}()
	r, err := b.waitFewer(wctx, e, limit, func() *renewal { return b.renew(ctx, e) })
	evict(nil)
	<-kept
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = b.renew(ctx, e)
	}
	if err := b.restarted(ctx, e, r, "renewing the lease"); err != nil {
		return nil, err
	}
	go b.markSlot(*e) // off the hand-off path
	return b.newLease(*e), nil
}

// waitFewer returns once fewer than limit entries are older than e's,
// with the keep-alive (from renew) sent beside the read that made sure,
// if one was. A read that fails is tried again while ctx lasts.
func (b *Backend) waitFewer(ctx context.Context, e *entry, limit int, renew func() *renewal) (*renewal, error) {
	var r *renewal
	for {
		older, rev, err := b.olderEntries(ctx, e)
		if err == nil && len(older) < limit {
			return r, nil
		}
		if r != nil {
			<-r.done // no slot after all
			r = nil
		}
		var free bool
		switch {
		case err != nil && (errors.Is(err, errEvicted) || ctx.Err() != nil):
			return nil, err
		case err != nil:
			err = b.pause(ctx, e.key)
		case len(older) == limit:
			free, err = b.watchHolders(ctx, e, limit)
		default:
			free, err = b.watchAhead(ctx, e.key, older[len(older)-1], rev)
		}
		if err != nil {
			return nil, err
		}
		if free {
			r = renew()
		}
	}
}

// watchHolders is the first waiter's wait: it watches key's queue for
// deletions, then reads the entries older than e's (a deletion between
// the two is in both, and counted once), and counts them down. It
// reports true when they became fewer than limit; false, for the caller
// to read again, when e's own entry went or, after a pause, when the
// watch broke.
func (b *Backend) watchHolders(ctx context.Context, e *entry, limit int) (bool, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	older := map[string]bool{}
	var read int64
	for wr := range b.cli.Watch(wctx, b.queuePrefix(e.key), clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify()) {
		if wr.Err() != nil {
			break
		}
		if wr.Created {
			kvs, rev, err := b.olderEntries(ctx, e)
			if err != nil {
				return false, nil
			}
			for _, kv := range kvs {
				older[string(kv.Key)] = true
			}
			read = rev
		}
		for _, ev := range wr.Events {
			if ev.Type != mvccpb.DELETE || ev.Kv.ModRevision <= read {
				continue // not a deletion, or one the read saw
			}
			if string(ev.Kv.Key) == e.name {
				return false, nil
			}
			delete(older, string(ev.Kv.Key))
		}
		if len(older) < limit {
			return true, nil
		}
	}
	return false, b.pause(ctx, e.key)
}

// watchAhead is a later waiter's wait: it returns when ahead, the entry
// just ahead of it as read at revision rev, is deleted or written (it got
// a slot, see markSlot), or after a pause when the watch breaks. Once the
// watch is live, one read tells whether that happened in between. It
// reports true for a deletion: the slot of one that held it may be free.
func (b *Backend) watchAhead(ctx context.Context, key string, ahead *mvccpb.KeyValue, rev int64) (bool, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	name := string(ahead.Key)
	for wr := range b.cli.Watch(wctx, name, clientv3.WithCreatedNotify()) {
		switch {
		case wr.Err() != nil:
			return false, b.pause(ctx, key)
		case wr.Created:
			if b.unchanged(ctx, ahead) {
				continue
			}
			return false, nil
		}
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision > rev {
				return ev.Type == mvccpb.DELETE, nil
			}
		}
	}
	return false, b.pause(ctx, key)
}

// unchanged tells whether the entry kv is still there as it was read; a
// failed read says no, so that the caller reads the queue again.
func (b *Backend) unchanged(ctx context.Context, kv *mvccpb.KeyValue) bool {
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Get(rctx, string(kv.Key))
	return err == nil && len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision == kv.ModRevision
}

// pause waits queueRetry, or fails when ctx ends first.
func (b *Backend) pause(ctx context.Context, key string) error {
	select {
	case <-ctx.Done():
		return b.failed(ctx, "waiting", key, ctx.Err())
	case <-time.After(queueRetry):
		return nil
	}
}

// olderEntries reads the entries older than e's, oldest first, without
// their values, and the revision it read at; it fails with errEvicted
// when e's entry is gone.
func (b *Backend) olderEntries(ctx context.Context, e *entry) ([]*mvccpb.KeyValue, int64, error) {
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(e.name), "=", e.rev)).
		Then(clientv3.OpGet(b.queuePrefix(e.key), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(e.rev-1), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))).
		Commit()
	if err != nil {
		return nil, 0, b.failed(ctx, "reading the queue", e.key, err)
	}
	if !resp.Succeeded {
		return nil, 0, fmt.Errorf("%s: lock %q: %w", b.addr, e.key, errEvicted)
	}
	return resp.Responses[0].GetResponseRange().Kvs, resp.Header.Revision, nil
}

// markSlot is mark for a semaphore's waiter that got a slot: the write is
// what wakes the waiter behind it (see watchAhead), so it is tried again
// until it lands, the entry is gone, the backend is closed, or twice the
// TTL (at least a minute) has passed: a lease that nobody could renew for
// that long has expired, and its entry's deletion wakes that waiter.
func (b *Backend) markSlot(e entry) {
	since := time.Now().UnixMicro()
	for end := time.Now().Add(max(time.Minute, 2*e.ttl)); !b.markOnce(e, since) && b.cli.Ctx().Err() == nil && time.Now().Before(end); {
		time.Sleep(queueRetry)
	}
}
