package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
)

// acquireWaiting takes the lock on one session, waiting until ctx ends. A
// free lock costs one statement. A held one makes the session LISTEN on the
// key's channel and try again (the holder may have released before the
// LISTEN), then sleep until a NOTIFY from a release or the holder's expiry
// by the server's clock, whichever comes first; each wake-up costs one
// statement, and nothing polls.
//
// LISTEN needs a session of its own: through a transaction-pooling
// PgBouncer the notifications are lost, and waiters then wake at the
// holder's expiry only.
func (b *Backend) acquireWaiting(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	c, err := b.connect(ctx)
	if err != nil {
		return nil, b.waitFail(ctx, key, err)
	}
	listening := false
	defer func() {
		if listening {
			discard(c) // it would keep receiving the key's notifications
		} else {
			b.conns.put(c)
		}
	}()
	for {
		l, err := b.tryBounded(ctx, c, key, o)
		var held *backend.HeldError
		if !errors.As(err, &held) {
			if err != nil {
				return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("acquiring lock %q", key), err))
			}
			return l, nil
		}
		if !listening {
			listening = true
			err = b.listen(ctx, c, key)
		} else {
			err = sleep(ctx, c, held.Status.TTL)
		}
		if err != nil {
			return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("waiting for lock %q", key), err))
		}
	}
}

// connect returns a pooled session, or a new one within statementTimeout.
func (b *Backend) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	c, err := b.conns.get(ctx)
	return c, b.fail("connecting", err)
}

// tryBounded is tryAcquire within statementTimeout.
func (b *Backend) tryBounded(ctx context.Context, c *pgx.Conn, key string, o backend.AcquireOptions) (*lease, error) {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	return b.tryAcquire(ctx, c, key, o)
}

func (b *Backend) listen(ctx context.Context, c *pgx.Conn, key string) error {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	_, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{channel(b.table, key)}.Sanitize())
	return err
}

// sleep waits on c for a notification, or until left has passed: the
// holder's lease can have expired by then. A notification that came while
// a statement ran was buffered by pgx and ends the sleep at once.
func sleep(ctx context.Context, c *pgx.Conn, left time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, max(left, time.Millisecond))
	defer cancel()
	_, err := c.WaitForNotification(wctx)
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		return nil // the holder's expiry; pgx keeps the session usable
	}
	return err
}

// waitFail is err, or the reason ctx ended when it did: the caller gave up
// waiting, which is not the server's fault.
func (b *Backend) waitFail(ctx context.Context, key string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("waiting for lock %q: %w", key, context.Cause(ctx))
	}
	return err
}
