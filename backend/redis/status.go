package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.HolderReleaser = (*Backend)(nil)

// Inspect reads the lock (plain or semaphore), its time left and the last
// token issued, in one consistent step.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Status, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Status{}, err
	}
	n := b.names(key)
	res, err := b.scripts.inspect.Run(ctx, b.client, n.with(n.lock, n.counter, n.meta)).Slice()
	if err == nil && len(res) != 6 {
		err = fmt.Errorf("%w: inspect reply %v", errMalformed, res)
	}
	if err == nil {
		var st backend.Status
		if st, err = parseInspect(key, res); err == nil {
			return st, nil
		}
	}
	return backend.Status{Key: key}, b.unavailable("inspect", key, err)
}

// parseInspect reads inspect.lua's reply.
func parseInspect(key string, res []any) (backend.Status, error) {
	if value, ok := res[0].(string); ok {
		pttl, _ := res[1].(int64)
		st, err := parseValue(key, value, time.Duration(pttl)*time.Millisecond)
		if err != nil {
			return backend.Status{}, err
		}
		rec, _ := res[3].([]any)
		addRecord(&st, value, rec)
		return st, nil
	}
	if limit, ok := res[4].(string); ok {
		n, err := strconv.Atoi(limit)
		if err != nil {
			return backend.Status{}, fmt.Errorf("%w: limit %q", errMalformed, limit)
		}
		flat, _ := res[5].([]any)
		st, err := semStatus(key, n, flat)
		if err != nil || st.Held {
			return st, err
		}
	}
	st := backend.Status{Key: key}
	if last, ok := res[2].(string); ok {
		tok, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			return st, fmt.Errorf("%w: token counter %q", errMalformed, last)
		}
		st.Token = backend.Token(tok)
	}
	return st, nil
}

// ForceRelease deletes the lock, or every holder of a semaphore, whoever
// holds it, and wakes the next waiters. The holders' next renewals find
// their values gone and report ErrLost; the token counter is untouched,
// so the next grant is still higher.
func (b *Backend) ForceRelease(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	n := b.names(key)
	if err := b.scripts.force.Run(ctx, b.client, n.with(n.lock, n.queue, n.meta), n.wake).Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return b.unavailable("force-release", key, err)
	}
	return nil
}

// ReleaseHolder breaks the hold of key's holder whose token is token (the
// plain lock's, or one semaphore holder's) in one script, and wakes the
// waiters that may take its place. It returns an error wrapping
// backend.ErrLost when no live holder has that token.
func (b *Backend) ReleaseHolder(ctx context.Context, key string, token backend.Token) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	n := b.names(key)
	got, err := b.scripts.holder.Run(ctx, b.client, n.with(n.lock, n.queue, n.meta), token.String(), n.wake).Int()
	if err != nil {
		return b.unavailable("release-holder", key, err)
	}
	if got != 1 {
		return fmt.Errorf("%w: lock %q on redis %s has no holder with token %s", backend.ErrLost, key, b.url, token)
	}
	return nil
}
