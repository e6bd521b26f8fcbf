package redis

import (
	"bytes"
	"context"
	_ "embed" // the script lives in lua/checkpoint.lua
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.Checkpointer = (*Backend)(nil)

//go:embed lua/checkpoint.lua
var checkpointLua string

var checkpointScript = goredis.NewScript(checkpointLua)

// checkpointKey holds "TOKEN VALUE", in the lock's slot.
func (b *Backend) checkpointKey(key string) string { return b.prefix + "{" + key + "}:checkpoint" }

// SetCheckpoint stores value in one script that first checks that the lock
// is held with token.
func (b *Backend) SetCheckpoint(ctx context.Context, key string, token backend.Token, value []byte) error {
	if err := backend.ValidateCheckpoint(key, token, value); err != nil {
		return err
	}
	n := b.names(key)
	ok, err := checkpointScript.Run(ctx, b.client, []string{n.lock, b.checkpointKey(key)}, token.String(), value).Int()
	if err != nil {
		return b.unavailable("writing the checkpoint of", key, err)
	}
	if ok != 1 {
		return fmt.Errorf("%w: checkpoint of %q refused: token %v is not the holder's", backend.ErrLost, key, token)
	}
	return nil
}

// GetCheckpoint reads key's checkpoint.
func (b *Backend) GetCheckpoint(ctx context.Context, key string) (backend.Checkpoint, bool, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Checkpoint{}, false, err
	}
	raw, err := b.client.Get(ctx, b.checkpointKey(key)).Bytes()
	if errors.Is(err, goredis.Nil) {
		return backend.Checkpoint{}, false, nil
	}
	if err != nil {
		return backend.Checkpoint{}, false, b.unavailable("reading the checkpoint of", key, err)
	}
	tok, value, ok := bytes.Cut(raw, []byte(" "))
	t, err := strconv.ParseUint(string(tok), 10, 64)
	if !ok || err != nil {
		return backend.Checkpoint{}, false, fmt.Errorf("%w: checkpoint of %q", errMalformed, key)
	}
	return backend.Checkpoint{Value: value, Token: backend.Token(t)}, true, nil
}

// ClearCheckpoint deletes key's checkpoint.
func (b *Backend) ClearCheckpoint(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	if err := b.client.Del(ctx, b.checkpointKey(key)).Err(); err != nil {
		return b.unavailable("clearing the checkpoint of", key, err)
	}
	return nil
}
