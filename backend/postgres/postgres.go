// Package postgres is lockrun's PostgreSQL backend. Locks are rows of one
// lease table, keyed by lock name and never deleted: each row keeps the
// key's fencing counter, the holder, its run id and an expiry on the
// server's clock. Every operation is one autocommitted statement, so the
// lock needs no session state between statements and the backend works
// through a transaction-pooling PgBouncer (a waiter's line and LISTEN,
// kept until its command starts, are only for the hand-off's order and
// speed). Waiters queue in order of arrival; the one
// at the front LISTENs on the key's channel and is woken by the NOTIFY that
// a release sends in the same statement. A semaphore (a limit above 1)
// is the key's same row, carrying every holder; see sql/sem_acquire.sql.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
)

// statementTimeout bounds a statement whose caller set no deadline, so
// that a hung server surfaces as ErrUnavailable instead of a hang. Renewals
// carry the heartbeat's tighter deadline.
const statementTimeout = 5 * time.Second

var _ backend.Backend = (*Backend)(nil)

// Backend keeps locks in a PostgreSQL table. It is safe for concurrent use.
type Backend struct {
	addr   string // the URL without secrets, for messages
	table  pgx.Identifier
	create bool
	sql    statements
	conns  *conns

	handedOn atomic.Bool // a release left someone waiting: see Close
	pending  leftovers   // granted waits not tidied up yet (see leftover)
}

// OpenURL returns a backend for a postgres:// or postgresql:// URL: any
// connection string pgx accepts, plus the lockrun_table and
// lockrun_create_table parameters. It does not connect: each operation
// connects when it needs to, under its own context.
func OpenURL(u *url.URL) (*Backend, error) {
	s, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return &Backend{
		addr:   backend.Redact(u.String()),
		table:  s.table,
		create: s.create,
		sql:    newStatements(s.table),
		conns:  newConns(s.conn),
	}, nil
}

// Table is the quoted name of the lease table.
func (b *Backend) Table() string { return b.table.Sanitize() }

// Close closes the backend's idle sessions, and those a granted wait
// kept (see leftover), once a lease settling (see settle) is done with
// its own; sessions in use close when their call returns.
// After a release that left someone waiting it first
// waits closeDelay: each session closed ends a server process, work for
// the server and the machine that would otherwise come just as the next
// in line takes the lock and starts its command.
func (b *Backend) Close() error {
	if b.handedOn.Load() {
		time.Sleep(closeDelay)
	}
	b.pending.close()
	b.conns.close()
	return nil
}

// closeDelay is how long Close waits after a release that left someone
// waiting: about a hand-off on a quiet host (a wake-up, one statement, a
// command's start).
const closeDelay = 3 * time.Millisecond

// Init creates the lease table if it does not exist, for teams that forbid
// DDL at run time (see ParamCreateTable), and installs lockrun_fence in
// its schema (see FenceSQLState). It is safe to run concurrently and more
// than once.
func (b *Backend) Init(ctx context.Context) error {
	err := b.session(ctx, func(ctx context.Context, c *pgx.Conn) error {
		return b.createTable(ctx, c)
	})
	if err != nil {
		return b.fail("creating table "+b.Table(), err)
	}
	err = b.session(ctx, func(ctx context.Context, c *pgx.Conn) error {
		return b.installFence(ctx, c)
	})
	return b.fail("installing "+b.Fence(), err)
}

// Acquire takes the lock in one statement; see sql/acquire.sql. With
// o.Wait it joins the key's waiting line; see acquireWaiting.
func (b *Backend) Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	if err := backend.ValidateRequest(key, o); err != nil {
		return nil, err
	}
	if o.Wait {
		return b.acquireWaiting(ctx, key, o)
	}
	var l *lease
	err := b.session(ctx, func(ctx context.Context, c *pgx.Conn) (err error) {
		l, err = b.tryAcquire(ctx, c, key, o)
		return err
	})
	if err != nil {
		return nil, b.fail(fmt.Sprintf("acquiring lock %q", key), err)
	}
	return l, nil
}

// raceRetries bounds how often tryAcquire asks again after losing a race
// to a concurrent acquirer: each retry sees that acquirer's commit.
const raceRetries = 3

// tryAcquire runs the acquire statement on c until it is decisive: the
// lock is ours, or a live holder is named. It returns a *backend.HeldError
// when the lock is taken; its TTL is the holder's time left, and a
// *backend.LimitError when a semaphore holds the key. A lease is
// returned only when the statement wrote it, never for a row of this run
// that the statement merely read, so that Start() always precedes the
// server's start of the TTL. c must not be inside a transaction block:
// there now() would be the transaction's start, before Start(). A limit
// above 1 takes a semaphore's slot instead; see trySemaphore.
func (b *Backend) tryAcquire(ctx context.Context, c *pgx.Conn, key string, o backend.AcquireOptions) (*lease, error) {
	if o.EffectiveLimit() > 1 {
		return b.trySemaphore(ctx, c, key, o)
	}
	ttl := roundUp(o.TTL)
	st := backend.Status{Key: key, Held: true}
	for range raceRetries {
		var left, server int64
		var limit int
		var ours bool
		var start time.Time
		err := b.retryMissingTable(ctx, c, func() error {
			start = time.Now()
			return c.QueryRow(ctx, b.sql.acquire, key, o.Holder, o.RunID, ttl.Microseconds(), encodeInfo(o.Info)).
				Scan(&st.Token, &st.Holder, &st.RunID, &left, &ours, &server, &limit)
		})
		end := time.Now()
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			continue // a concurrent first acquirer of the key won
		case err != nil:
			return nil, tokenRange(err)
		case ours: // this statement started the lease's TTL, after start
			skew := backend.Skew(start, end, time.UnixMicro(server))
			return &lease{b: b, key: key, runID: o.RunID, token: st.Token, ttl: ttl, start: start, skew: skew, minHold: o.MinHold}, nil
		case left > 0 && limit > 1: // a semaphore's row
			return nil, &backend.LimitError{Key: key, Want: 1, Have: limit}
		case left > 0 && st.RunID != o.RunID:
			st.RunID, st.Revoked = cutRevoked(st.RunID)
			st.TTL = time.Duration(left) * time.Microsecond
			return nil, &backend.HeldError{Status: st}
		}
	}
	return nil, &backend.HeldError{Status: backend.Status{Key: key, Held: true}}
}

// Inspect reads the key's row, and never writes: a key never taken, or a
// table not created yet, is free with token 0.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Status, error) {
	st := backend.Status{Key: key}
	if err := backend.ValidateKey(key); err != nil {
		return st, err
	}
	var r record
	err := b.session(ctx, func(ctx context.Context, c *pgx.Conn) error {
		return r.scan(c.QueryRow(ctx, b.sql.inspect, key), &st)
	})
	if errors.Is(err, pgx.ErrNoRows) || isMissingTable(err) {
		return backend.Status{Key: key}, nil
	}
	if err != nil {
		return backend.Status{Key: key}, b.fail(fmt.Sprintf("inspecting lock %q", key), err)
	}
	if !st.Held {
		st.Holder, st.RunID = "", ""
		return st, nil
	}
	r.fill(&st)
	return st, nil
}

// ForceRelease frees the key whoever holds it and wakes its waiters. The
// token stays, so the next holder's is higher; the revoked holder's next
// renewal finds its lease gone. Without the table nothing is held, and
// nothing is created.
func (b *Backend) ForceRelease(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	err := b.session(ctx, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, b.sql.forceRelease, key, channel(b.table, key))
		return err
	})
	if isMissingTable(err) {
		return nil
	}
	return b.fail(fmt.Sprintf("releasing lock %q", key), err)
}

// session runs f on a pooled session, under ctx bounded by
// statementTimeout, and puts the session back.
func (b *Backend) session(ctx context.Context, f func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	c, err := b.conns.get(ctx)
	if err != nil {
		return err
	}
	defer b.conns.put(c)
	return f(ctx, c)
}

// roundUp is d rounded up to the microseconds the server counts in, so the
// granted TTL is never shorter than the one asked for.
func roundUp(d time.Duration) time.Duration {
	return (d + time.Microsecond - 1).Truncate(time.Microsecond)
}
