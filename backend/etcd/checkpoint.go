package etcd

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.Checkpointer = (*Backend)(nil)

// checkpointKey holds "TOKEN VALUE". It lives beside the prefix, not under
// it ("/lockrun.checkpoints/K" for "/lockrun/"), so that no lock's queue
// prefix ("/lockrun/K/") can contain it.
func (b *Backend) checkpointKey(key string) string {
	return strings.TrimSuffix(b.cfg.Prefix, "/") + ".checkpoints/" + key
}

// SetCheckpoint stores value when the holder (the oldest queue entry)
// carries token, in one transaction that compares that entry's create
// revision: an entry deleted meanwhile (an expired or revoked lease: the
// only way a newer holder can be granted) stores nothing, and a new entry
// under the same name would have a newer revision; a revoked holder's
// (one with a revocation marker) stores nothing either. A semaphore's holders
// have no checkpoint: their tokens are refused.
func (b *Backend) SetCheckpoint(ctx context.Context, key string, token backend.Token, value []byte) error {
	if err := backend.ValidateCheckpoint(key, token, value); err != nil {
		return err
	}
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	head, err := b.cli.Get(rctx, b.queuePrefix(key), clientv3.WithFirstCreate()...)
	if err != nil {
		return b.failed(ctx, "reading the lock", key, err)
	}
	if len(head.Kvs) == 0 || entryToken(head.Kvs[0]) != token || b.entryLimit(key, string(head.Kvs[0].Key)) != 1 {
		return b.refused(key, token)
	}
	holder := head.Kvs[0]
	resp, err := b.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(string(holder.Key)), "=", holder.CreateRevision),
			clientv3.Compare(clientv3.CreateRevision(b.markerName(key, string(holder.Key))), "=", 0)).
		Then(clientv3.OpPut(b.checkpointKey(key), token.String()+" "+string(value))).
		Commit()
	if err != nil {
		return b.failed(ctx, "writing the checkpoint", key, err)
	}
	if !resp.Succeeded {
		return b.refused(key, token)
	}
	return nil
}

func (b *Backend) refused(key string, token backend.Token) error {
	return fmt.Errorf("%w: checkpoint of %q refused: token %v is not the holder's", backend.ErrLost, key, token)
}

// GetCheckpoint reads key's checkpoint.
func (b *Backend) GetCheckpoint(ctx context.Context, key string) (backend.Checkpoint, bool, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Checkpoint{}, false, err
	}
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	resp, err := b.cli.Get(rctx, b.checkpointKey(key))
	if err != nil {
		return backend.Checkpoint{}, false, b.failed(ctx, "reading the checkpoint", key, err)
	}
	if len(resp.Kvs) == 0 {
		return backend.Checkpoint{}, false, nil
	}
	tok, value, ok := bytes.Cut(resp.Kvs[0].Value, []byte(" "))
	t, err := strconv.ParseUint(string(tok), 10, 64)
	if !ok || err != nil {
		return backend.Checkpoint{}, false, fmt.Errorf("%w: %s: checkpoint of %q is not lockrun's", backend.ErrUnavailable, b.addr, key)
	}
	return backend.Checkpoint{Value: value, Token: backend.Token(t)}, true, nil
}

// ClearCheckpoint deletes key's checkpoint.
func (b *Backend) ClearCheckpoint(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	rctx, cancel := b.bounded(ctx)
	defer cancel()
	if _, err := b.cli.Delete(rctx, b.checkpointKey(key)); err != nil {
		return b.failed(ctx, "clearing the checkpoint", key, err)
	}
	return nil
}
