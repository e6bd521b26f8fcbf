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

// Inspect reads the lock, its time left and the last token issued, in one
// consistent step.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Status, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Status{}, err
	}
	n := b.names(key)
	res, err := b.scripts.inspect.Run(ctx, b.client, []string{n.lock, n.counter, n.meta}).Slice()
	if err == nil && len(res) != 4 {
		err = fmt.Errorf("%w: inspect reply %v", errMalformed, res)
	}
	if err != nil {
		return backend.Status{Key: key}, b.unavailable("inspect", key, err)
	}
	if value, ok := res[0].(string); ok {
		pttl, _ := res[1].(int64)
		st, err := parseValue(key, value, time.Duration(pttl)*time.Millisecond)
		if err != nil {
			return backend.Status{Key: key}, b.unavailable("inspect", key, err)
		}
		rec, _ := res[3].([]any)
		addRecord(&st, value, rec)
		return st, nil
	}
	st := backend.Status{Key: key}
	if last, ok := res[2].(string); ok {
		tok, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			return st, b.unavailable("inspect", key, fmt.Errorf("%w: token counter %q", errMalformed, last))
		}
		st.Token = backend.Token(tok)
	}
	return st, nil
}

// ForceRelease deletes the lock whoever holds it and wakes the next waiter.
// The holder's next renewal finds its value gone and reports ErrLost; the
// token counter is untouched, so the next grant is still higher.
func (b *Backend) ForceRelease(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	n := b.names(key)
	if err := b.scripts.force.Run(ctx, b.client, []string{n.lock, n.queue, n.meta}, n.wake).Err(); err != nil && !errors.Is(err, goredis.Nil) {
		return b.unavailable("force-release", key, err)
	}
	return nil
}
