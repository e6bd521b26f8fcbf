package zookeeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.Checkpointer = (*Backend)(nil)

// checkpointDir holds one checkpoint per key, as "TOKEN VALUE"; like
// stateDir, its name cannot be a key.
func (b *Backend) checkpointDir() string { return b.cfg.Root + "/.checkpoints" }

func (b *Backend) checkpointPath(key string) string { return b.checkpointDir() + "/" + key }

// SetCheckpoint stores value when the holder (the lowest contender) carries
// token, in one multi-op that checks the holder's node at the version it
// was read with: a node gone meanwhile (its session expired or was closed:
// the only way a newer holder can be granted) stores nothing.
func (b *Backend) SetCheckpoint(ctx context.Context, key string, token backend.Token, value []byte) error {
	if err := backend.ValidateCheckpoint(key, token, value); err != nil {
		return err
	}
	s, err := b.adminSession(ctx)
	if err != nil {
		return b.failed(ctx, "connecting", key, err)
	}
	holder, version, err := b.holderNode(ctx, s, key, token)
	if err != nil {
		return err
	}
	data := append([]byte(token.String()+" "), value...)
	for range 3 {
		ops := []any{&zk.CheckVersionRequest{Path: holder, Version: version}, &zk.SetDataRequest{Path: b.checkpointPath(key), Data: data, Version: -1}}
		_, err = call(ctx, b.cfg.RequestTimeout, func() ([]zk.MultiResponse, error) { return s.conn.Multi(ops...) })
		if !errors.Is(err, zk.ErrNoNode) {
			break
		}
		// The checkpoint's node may be missing (the first one), or the
		// holder's node may be gone: create the former, and let the
		// check tell the latter on the next try.
		if err := b.ensure(ctx, s, b.checkpointPath(key)); err != nil {
			return b.failed(ctx, "creating the checkpoint", key, err)
		}
	}
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
		return b.refused(key, token)
	case err != nil:
		return b.failed(ctx, "writing the checkpoint", key, err)
	}
	return nil
}

// holderNode is the path and version of key's holder's node when its
// token is token; otherwise an error wrapping ErrLost.
func (b *Backend) holderNode(ctx context.Context, s *session, key string, token backend.Token) (string, int32, error) {
	kids, err := contenders(ctx, b, s, key)
	if err != nil {
		return "", 0, b.failed(ctx, "reading the lock", key, err)
	}
	if len(kids) == 0 || nodeLimit(kids[0]) > 1 { // a semaphore's holders keep no checkpoint
		return "", 0, b.refused(key, token)
	}
	p := b.lockPath(key) + "/" + kids[0]
	type got struct {
		data []byte
		stat *zk.Stat
	}
	g, err := call(ctx, b.cfg.RequestTimeout, func() (got, error) {
		data, stat, err := s.conn.Get(p)
		return got{data, stat}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return "", 0, b.refused(key, token)
	case err != nil:
		return "", 0, b.failed(ctx, "reading the lock", key, err)
	case contenderStatus(key, kids[0], g.data).Token != token:
		return "", 0, b.refused(key, token)
	}
	return p, g.stat.Version, nil
}

func (b *Backend) refused(key string, token backend.Token) error {
	return fmt.Errorf("%w: checkpoint of %q refused: token %v is not the holder's", backend.ErrLost, key, token)
}

// GetCheckpoint reads key's checkpoint.
func (b *Backend) GetCheckpoint(ctx context.Context, key string) (backend.Checkpoint, bool, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Checkpoint{}, false, err
	}
	s, err := b.adminSession(ctx)
	if err != nil {
		return backend.Checkpoint{}, false, b.failed(ctx, "connecting", key, err)
	}
	data, err := call(ctx, b.cfg.RequestTimeout, func() ([]byte, error) {
		data, _, err := s.conn.Get(b.checkpointPath(key))
		return data, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return backend.Checkpoint{}, false, nil
	case err != nil:
		return backend.Checkpoint{}, false, b.failed(ctx, "reading the checkpoint", key, err)
	case len(data) == 0: // created, never written, or cleared
		return backend.Checkpoint{}, false, nil
	}
	tok, value, ok := bytes.Cut(data, []byte(" "))
	t, err := strconv.ParseUint(string(tok), 10, 64)
	if !ok || err != nil {
		return backend.Checkpoint{}, false, fmt.Errorf("%w: %s: checkpoint of %q is not lockrun's", backend.ErrUnavailable, b.addr, key)
	}
	return backend.Checkpoint{Value: value, Token: backend.Token(t)}, true, nil
}

// ClearCheckpoint deletes key's checkpoint node.
func (b *Backend) ClearCheckpoint(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	s, err := b.adminSession(ctx)
	if err != nil {
		return b.failed(ctx, "connecting", key, err)
	}
	_, err = call(ctx, b.cfg.RequestTimeout, func() (struct{}, error) {
		return struct{}{}, s.conn.Delete(b.checkpointPath(key), -1)
	})
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return b.failed(ctx, "clearing the checkpoint", key, err)
	}
	return nil
}
