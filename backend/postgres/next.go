package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// awaitFront waits, next in line, for the head of it. The caller holds
// the line's lock (queueID) in tx on c, its place kept until line.until;
// awaitFront connects a second session and waits there, in a
// transaction, for the front's lock (frontID), which the waiter at the
// head holds until it has the lease. Meanwhile it keeps its place in
// line on c as the front does (place.keepFor), by the lease it saw on
// joining: a waiter next in line that froze or was cut off passes its
// place on once that and frontSlack have run out, as a front would.
//
// With the front's lock granted it ends tx, which makes the waiter behind
// next in line, and returns the front's place (the transaction on the
// second session, which may stay silent for silence at first) and c, out
// of any transaction, for the front to listen and try on: a session that
// has run the lease's statements already, where a new one would start a
// server process and fill its caches in the hand-off's window. c is nil
// if its place was lost meanwhile: the front then connects one.
//
// The front's lock is waited for with no lock_timeout: only this lockrun
// takes it, and it always bounds its silence there.
func (b *Backend) awaitFront(ctx context.Context, key string, c *pgx.Conn, line *place, silence time.Duration) (*place, *pgx.Conn, *pgx.Conn, error) {
	fc, ftx, err := b.beginFront(ctx)
	if err != nil {
		b.leaveQueue(c, line.tx)
		return nil, nil, nil, err
	}
	type grant struct {
		err error
		at  time.Time // the server's silence timer starts about then
	}
	granted := make(chan grant, 1)
	go func() {
		_, err := ftx.Exec(ctx, queueSQL, frontID(b.table, key), "0", serverMS(silence))
		granted <- grant{err, time.Now()}
	}()
	for {
		timer := time.NewTimer(time.Until(line.until) - wakeLead)
		select {
		case g := <-granted:
			timer.Stop()
			return b.comeToFront(ctx, c, line, fc, ftx, g.at.Add(silence), g.err)
		case <-timer.C:
		}
		if c != nil && line.keepFor(ctx, silence-frontSlack) != nil {
			// Its front lock's wait, queued first, keeps its turn.
			discard(c)
			c, line.until = nil, time.Now().Add(maxNap)
		}
	}
}

// beginFront connects the session that waits for the front's place, and
// opens the transaction it waits in, within statementTimeout.
func (b *Backend) beginFront(ctx context.Context) (*pgx.Conn, pgx.Tx, error) {
	fc, err := b.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	bctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	ftx, err := fc.BeginTx(bctx, pgx.TxOptions{BeginQuery: beginQueue})
	if err != nil {
		discard(fc)
		return nil, nil, err
	}
	return fc, ftx, nil
}

// comeToFront ends the wait for the front's lock on fc, granted unless
// err: it ends the line's transaction on c, rolled back (c is discarded
// and nil if that fails), and returns the front's place, which lasts
// until until. On err it leaves both.
func (b *Backend) comeToFront(ctx context.Context, c *pgx.Conn, line *place, fc *pgx.Conn, ftx pgx.Tx, until time.Time, err error) (*place, *pgx.Conn, *pgx.Conn, error) {
	if err != nil {
		if c != nil {
			b.leaveQueue(c, line.tx)
		}
		b.leaveQueue(fc, ftx)
		return nil, nil, nil, fmt.Errorf("waiting at the head of the line: %w", err)
	}
	front := &place{tx: ftx, until: until}
	if c != nil {
		rctx, cancel := context.WithTimeout(ctx, statementTimeout)
		defer cancel()
		if err := line.tx.Rollback(rctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
			discard(c)
			c = nil
		}
	}
	return front, fc, c, nil
}
