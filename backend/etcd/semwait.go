package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitSlot waits until fewer than limit entries are older than e's, then
// returns its lease, as waitTurn does for a plain lock: the lease is
// renewed while it waits, and one more keep-alive, sent beside the read
// that makes sure the slot is free, starts the holder's deadline.
func (b *Backend) waitSlot(ctx context.Context, e *entry, limit int) (*lease, error) {
	wctx, evict := context.WithCancelCause(ctx)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		b.keepQueued(wctx, e, evict)
	}()
	r, err := b.waitFewer(wctx, e, limit, func() *renewal { return b.renew(ctx, e) })
	evict(nil)
	<-kept
	if err != nil {
		return nil, err
	}
	if err := b.restarted(ctx, e, r, "renewing the lease"); err != nil {
		return nil, err
	}
	go b.mark(*e) // off the hand-off path
	return b.newLease(*e), nil
}

// waitFewer returns once fewer than limit entries are older than e's,
// with a keep-alive (from renew) that was sent beside the read that made
// sure. The slots are released in any order, so the entry N places ahead
// is not the one to watch: each round watches the whole queue for
// deletions (puts are filtered out on the server) and counts the older
// entries down locally; a release costs the other waiters one event each
// and no request. A read that fails is tried again while ctx lasts.
func (b *Backend) waitFewer(ctx context.Context, e *entry, limit int, renew func() *renewal) (*renewal, error) {
	for {
		err := b.watchOlder(ctx, e, limit)
		if err != nil {
			return nil, err
		}
		r := renew()
		older, _, err := b.olderEntries(ctx, e)
		if err == nil && len(older) < limit {
			return r, nil
		}
		<-r.done // no slot after all
		if err != nil && (errors.Is(err, errEvicted) || ctx.Err() != nil) {
			return nil, err
		}
	}
}

// watchOlder returns when the entries older than e's may have become
// fewer than limit: it opens a watch on key's queue, then reads the older
// entries (a deletion between the two is in both, and counted once), and
// returns when the count is below limit, when e's own entry goes (for
// the caller's read to report it), or, after a pause, when the watch
// breaks.
func (b *Backend) watchOlder(ctx context.Context, e *entry, limit int) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	var older map[string]bool
	var read int64
watch:
	for wr := range b.cli.Watch(wctx, b.queuePrefix(e.key), clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify()) {
		switch {
		case wr.Err() != nil:
			break watch
		case wr.Created:
			names, rev, err := b.olderEntries(ctx, e)
			if errors.Is(err, errEvicted) || err == nil && len(names) < limit {
				return nil
			} else if err != nil {
				break watch
			}
			older, read = names, rev
			continue
		}
		for _, ev := range wr.Events {
			name := string(ev.Kv.Key)
			if ev.Type != mvccpb.DELETE || ev.Kv.ModRevision <= read {
				continue // already in the read, or not a deletion
			}
			if name == e.name {
				return nil
			}
			delete(older, name)
		}
		if len(older) < limit {
			return nil
		}
	}
	select {
	case <-ctx.Done():
		return b.failed(ctx, "waiting", e.key, ctx.Err())
	case <-time.After(queueRetry):
		return nil
	}
}

// olderEntries reads the names of the entries older than e's, and the
// revision it read at; it fails with errEvicted when e's entry is gone.
func (b *Backend) olderEntries(ctx context.Context, e *entry) (map[string]bool, int64, error) {
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(e.name), "=", e.rev)).
		Then(clientv3.OpGet(b.queuePrefix(e.key), clientv3.WithPrefix(), clientv3.WithMaxCreateRev(e.rev-1), clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return nil, 0, b.failed(ctx, "reading the queue", e.key, err)
	}
	if !resp.Succeeded {
		return nil, 0, fmt.Errorf("%s: lock %q: %w", b.addr, e.key, errEvicted)
	}
	names := map[string]bool{}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		names[string(kv.Key)] = true
	}
	return names, resp.Header.Revision, nil
}
