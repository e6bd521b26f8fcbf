package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
)

// acquireWaiting takes the lock, waiting until ctx ends. A free lock costs
// one statement. When it is held the caller joins the key's waiting line
// (see sql/queue.sql) and, once first in line, waits at the front: only
// the front waiter listens and tries, so a release wakes one client
// however many wait, and they are served in order of arrival.
func (b *Backend) acquireWaiting(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	c, err := b.connect(ctx)
	if err != nil {
		return nil, b.waitFail(ctx, key, err)
	}
	l, err := b.tryBounded(ctx, c, key, o)
	if !errors.Is(err, backend.ErrHeld) {
		b.conns.put(c)
		if err != nil {
			return nil, b.fail(fmt.Sprintf("acquiring lock %q", key), err)
		}
		return l, nil
	}
	tx, err := b.enqueue(ctx, c, key)
	if err != nil {
		b.conns.put(c)
		return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("queueing for lock %q", key), err))
	}
	defer b.leaveQueue(c, tx)
	return b.front(ctx, key, o)
}

// enqueue opens a transaction on c and blocks in it until c is first in
// the key's waiting line. A transaction, not a session lock, so that a
// transaction-pooling PgBouncer keeps the server session pinned to us.
func (b *Backend) enqueue(ctx context.Context, c *pgx.Conn, key string) (pgx.Tx, error) {
	tx, err := c.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, queueSQL, queueID(b.table, key)); err != nil {
		return nil, err
	}
	return tx, nil
}

// leaveQueue ends the queue transaction in the background, which lets the
// next waiter to the front; the caller's lease is not kept waiting.
func (b *Backend) leaveQueue(c *pgx.Conn, tx pgx.Tx) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
		defer cancel()
		_ = tx.Rollback(ctx)
		b.conns.put(c) // closed when the rollback failed
	}()
}

// front waits at the head of the line on a session of its own: it LISTENs
// on the key's channel, tries (the holder may have released before the
// LISTEN), then sleeps until a NOTIFY from a release or the holder's
// expiry by the server's clock, whichever comes first. Each wake-up costs
// one statement; nothing polls.
//
// Notifications need a session: through a transaction-pooling PgBouncer
// they are lost, and the front waiter then wakes at the holder's expiry.
func (b *Backend) front(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	c, err := b.connect(ctx)
	if err != nil {
		return nil, b.waitFail(ctx, key, err)
	}
	defer b.unlisten(c)
	if err := b.listen(ctx, c, key); err != nil {
		return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("waiting for lock %q", key), err))
	}
	for {
		l, err := b.tryBounded(ctx, c, key, o)
		var held *backend.HeldError
		if !errors.As(err, &held) {
			if err != nil {
				return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("acquiring lock %q", key), err))
			}
			return l, nil
		}
		if err := sleep(ctx, c, held.Status.TTL); err != nil {
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

// unlisten ends c's LISTEN and returns it to the pool, in the background:
// the new holder's lease is not kept waiting for it, and its release or
// renewal can usually reuse the session instead of connecting again.
func (b *Backend) unlisten(c *pgx.Conn) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
		defer cancel()
		if _, err := c.Exec(ctx, "UNLISTEN *"); err != nil {
			discard(c)
			return
		}
		b.conns.put(c)
	}()
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
