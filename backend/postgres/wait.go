package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
)

// acquireWaiting takes the lock, waiting until ctx ends. A free lock costs
// one statement. When it is held the caller joins the key's waiting line
// (see sql/queue.sql); once first in it, it is next in line, and waits
// for the head of it on a second session (see awaitFront); there, at the
// front, it listens and tries. Only the front waiter listens and tries,
// so a release wakes one client however many wait, and they are served
// in order of arrival. The next in line comes to the front ready: its
// second session connected while the front waited, and the first, which
// it tried on, warm for the front's statements.
//
// A waiter keeps its place in line however long the lock is held: waiting
// costs it nothing and the server nothing. The front waiter, and the one
// next in line, keep their places only while they speak on the sessions
// that hold them by the times they gave (see place): a waiter that is
// alive to the server but stuck (its process frozen, its host cut off)
// would otherwise hold up the whole line, and the server ends its session
// once it is silent for longer than the lease it saw can have lasted,
// plus frontSlack. A front that finds its place gone joins the line
// again, at the back. So does a waiter that waited lineBackstop, or whose
// wait a timeout of the server's not turned off for it ended, after it
// has tried once itself.
func (b *Backend) acquireWaiting(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	c, err := b.connect(ctx)
	if err != nil {
		return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("acquiring lock %q", key), err))
	}
	for {
		// On c outside any transaction: see tryAcquire.
		l, err := b.tryBounded(ctx, c, key, o)
		var held *backend.HeldError
		if !errors.As(err, &held) {
			b.conns.put(c)
			if err != nil {
				return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("acquiring lock %q", key), err))
			}
			return l, nil
		}
		silence := firstSilence(nextFree(held.Status))
		tx, err := b.enqueue(ctx, c, key, silence)
		if code := pgCode(err); (code == codeLockNotAvailable || code == codeQueryCanceled) && ctx.Err() == nil {
			continue // waited lineBackstop, or a timeout not ours ended the wait
		}
		if err != nil {
			b.conns.put(c)
			return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("queueing for lock %q", key), err))
		}
		var at *place
		var fc *pgx.Conn // the session at holds its place on
		at, fc, c, err = b.awaitFront(ctx, key, c, &place{tx: tx, until: time.Now().Add(silence)}, silence)
		if err != nil {
			return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("queueing for lock %q", key), err))
		}
		won, listener, err := b.front(ctx, key, o, c, at)
		switch {
		case errors.Is(err, errPlaceLost):
			discard(fc) // the server ended its session
			if c, err = b.connect(ctx); err != nil {
				return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("acquiring lock %q", key), err))
			}
			continue
		case err != nil:
			b.leaveQueue(fc, at.tx)
			return nil, err
		case o.EffectiveLimit() > 1: // a slot may be free for the next waiter now
			b.leaveQueue(fc, at.tx)
			b.unlisten(listener)
		default:
			won.leave(&leftover{queue: fc, tx: at.tx, listener: listener})
		}
		return won, nil
	}
}

// frontSlack is how much longer than it means to sleep a front waiter
// asks the server to let it be silent at the head of the line (see
// place.keepFor), and so how long past the lease it saw a front that froze
// or was cut off holds up the line. A healthy front needs some of it once
// awake: to try, and to speak again before its place runs out (wakeLead).
const frontSlack = 3 * time.Second

// wakeLead is the least time a front's place must have left when it wakes
// as it planned: time for a try and a keep, a round trip each, on a slow
// link (up to about a second) or a loaded host. A front that is slower
// loses its place, and joins the line again.
const wakeLead = 2 * time.Second

// maxNap is the longest a front sleeps between tries: a day, well within
// the server's longest timeout (2^31-1 ms, about 24.8 days).
const maxNap = 24 * time.Hour

// firstSilence is how long a waiter may be silent once first in line,
// having seen a lease with left to run: until that lease can have
// expired, but at least wakeLead (it connects a session, listens and
// tries in it before it speaks again), plus frontSlack.
func firstSilence(left time.Duration) time.Duration {
	return min(max(left, wakeLead), maxNap) + frontSlack
}

// lineBackstop is how long a waiter waits in line before it tries once
// itself and joins again at the back: a backstop for a front that set no
// bound on its silence (an older lockrun's). Long, since a front of this
// lockrun that stops speaking loses its place well before (frontSlack),
// and every rejoin is an error in the server's log and a wake-up.
const lineBackstop = 5 * time.Minute

// enqueue opens a transaction on c and blocks in it until c is first in
// the key's waiting line, or for at most lineBackstop; first, it may stay
// silent for silence (see queue.sql), until it keeps its place for
// longer. A transaction, not a session lock, so that a
// transaction-pooling PgBouncer keeps the server session pinned to us.
// On error the transaction is rolled back.
func (b *Backend) enqueue(ctx context.Context, c *pgx.Conn, key string, silence time.Duration) (pgx.Tx, error) {
	b.conns.learn(ctx, c) // before a second session is connected
	tx, err := c.BeginTx(ctx, pgx.TxOptions{BeginQuery: beginQueue})
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, queueSQL, queueID(b.table, key), serverMS(max(lineBackstop, silence)), serverMS(silence)); err != nil {
		rctx, cancel := context.WithTimeout(ctx, statementTimeout)
		defer cancel()
		_ = tx.Rollback(rctx) // c is then discarded by put if this fails
		return nil, err
	}
	return tx, nil
}

// beginQueue opens the queue transaction with no statement_timeout, in
// the same round trip: one set for the role, the database or the URL
// would end the wait in line, and the waiter would rejoin at the back.
// queue.sql cannot turn it off itself: a statement's timer is armed as
// it starts.
const beginQueue = "BEGIN; SET LOCAL statement_timeout = 0"

// leaveQueue ends a transaction that holds a place in line (the front's,
// or the line's) in the background, which lets the next waiter on; the
// caller's lease is not kept waiting. The session is closed then, not
// pooled: a holder needs one, and the one it listened on has run the
// lease's statements, where this one has not.
func (b *Backend) leaveQueue(c *pgx.Conn, tx pgx.Tx) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
		defer cancel()
		_ = tx.Rollback(ctx)
		discard(c)
	}()
}

// serverMS is d as a timeout setting's text: milliseconds, rounded up,
// at most the server's limit of 2^31-1.
func serverMS(d time.Duration) string {
	return strconv.FormatInt(min((d+time.Millisecond-1).Milliseconds(), math.MaxInt32), 10)
}

// place is the front waiter's hold on the head of the line: the server
// ends its queue session (tx's) if it is silent there until until, by our
// clock, or a little earlier (by the reply's way back). At first until is
// the grant of the place plus the silence enqueue gave the server.
type place struct {
	tx    pgx.Tx
	until time.Time
}

// errPlaceLost is the front waiter's place at the head of the line gone:
// its queue session ended, or did not answer in time.
var errPlaceLost = errors.New("lost its place at the head of the line")

// keepFor makes the place last until d from now and wakeLead more: if it
// would not, the front tells the server, on the queue session, that it
// may be silent for d and frontSlack more (sql/keep.sql), before the
// place can have run out. While the place has time enough it sleeps with
// no statement, so that a front woken by a release within the lease it
// saw on joining (the hand-off of a short job) costs none.
func (p *place) keepFor(ctx context.Context, d time.Duration) error {
	if time.Until(p.until) >= d+wakeLead {
		return nil
	}
	sent := time.Now()
	deadline := sent.Add(statementTimeout)
	if p.until.Before(deadline) {
		deadline = p.until // by then the server has ended the session
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if _, err := p.tx.Exec(ctx, keepSQL, serverMS(d+frontSlack)); err != nil {
		return fmt.Errorf("%w: %w", errPlaceLost, err)
	}
	p.until = sent.Add(d + frontSlack)
	return nil
}

// front waits at the head of the line on c, outside any transaction (a
// new session if c is nil), while at holds its place there: it LISTENs
// on the key's channel, tries (the holder may have released before the
// LISTEN), then sleeps until a NOTIFY from a release or the holder's
// expiry by the server's clock, whichever comes first. Each wake-up costs
// one statement; nothing polls.
//
// Notifications need a session: through a transaction-pooling PgBouncer
// they are lost, and the front waiter then wakes at the holder's expiry.
//
// With the lease it returns the session it listened on, still listening:
// see leftover.
func (b *Backend) front(ctx context.Context, key string, o backend.AcquireOptions, c *pgx.Conn, at *place) (*lease, *pgx.Conn, error) {
	if c == nil {
		var err error
		if c, err = b.connect(ctx); err != nil {
			return nil, nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("waiting for lock %q", key), err))
		}
	}
	l, err := b.listenAndTry(ctx, c, key, o, at)
	if err != nil {
		b.unlisten(c)
		return nil, nil, err
	}
	return l, c, nil
}

// listenAndTry is front's wait on c, its listening session, keeping its
// place at the head of the line (see place.keepFor); errPlaceLost if it
// cannot. Woken by a release, a plain lock's waiter tries with take.sql
// first.
func (b *Backend) listenAndTry(ctx context.Context, c *pgx.Conn, key string, o backend.AcquireOptions, at *place) (*lease, error) {
	if err := b.listen(ctx, c, key); err != nil {
		return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("waiting for lock %q", key), err))
	}
	try := b.tryBounded
	for {
		l, err := try(ctx, c, key, o)
		var held *backend.HeldError
		if !errors.As(err, &held) {
			if err != nil {
				return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("acquiring lock %q", key), err))
			}
			return l, nil
		}
		left := min(nextFree(held.Status), maxNap)
		wake := time.Now().Add(left)
		if err := at.keepFor(ctx, left); err != nil {
			return nil, b.waitFail(ctx, key, err)
		}
		notified, err := sleep(ctx, c, time.Until(wake))
		if err != nil {
			return nil, b.waitFail(ctx, key, b.fail(fmt.Sprintf("waiting for lock %q", key), err))
		}
		try = b.tryBounded
		if notified && o.EffectiveLimit() == 1 {
			try = b.takeBounded
		}
	}
}

// takeBounded takes the lock with take.sql, the hand-off's statement,
// within statementTimeout, and asks acquire.sql when that finds the lock
// not free: acquire.sql names the holder, or takes a row that is gone
// (or creates the table, or upgrades one an older lockrun made).
// Like tryAcquire, it must run outside any transaction block.
func (b *Backend) takeBounded(ctx context.Context, c *pgx.Conn, key string, o backend.AcquireOptions) (*lease, error) {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	ttl := roundUp(o.TTL)
	var token backend.Token
	var server int64
	start := time.Now()
	err := c.QueryRow(ctx, b.sql.take, key, o.Holder, o.RunID, ttl.Microseconds(), encodeInfo(o.Info)).Scan(&token, &server)
	end := time.Now()
	switch {
	case errors.Is(err, pgx.ErrNoRows) || isMissingTable(err) || pgCode(err) == codeUndefinedColumn:
		return b.tryAcquire(ctx, c, key, o)
	case err != nil:
		return nil, tokenRange(err)
	}
	skew := backend.Skew(start, end, time.UnixMicro(server))
	return &lease{b: b, key: key, runID: o.RunID, token: token, ttl: ttl, start: start, skew: skew, minHold: o.MinHold}, nil
}

// nextFree is how long until a holder of the key that st describes can
// have expired: a plain lock's time left, or a semaphore's soonest.
func nextFree(st backend.Status) time.Duration {
	left := st.TTL
	for _, h := range st.Holders {
		left = min(left, h.TTL)
	}
	return left
}

// connect returns a pooled session, or a new one within statementTimeout.
func (b *Backend) connect(ctx context.Context) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, statementTimeout)
	defer cancel()
	return b.conns.get(ctx)
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

// unlistenTimeout bounds an UNLISTEN: one round trip on a session that
// answered a moment ago.
const unlistenTimeout = time.Second

// unlisten is unlistenNow in the background.
func (b *Backend) unlisten(c *pgx.Conn) { go b.unlistenNow(context.Background(), c) }

// unlistenNow ends c's LISTEN and returns it to the pool, where the
// lease's release or renewal finds it instead of connecting again.
func (b *Backend) unlistenNow(ctx context.Context, c *pgx.Conn) {
	if b.stopListening(ctx, c) {
		b.conns.put(c)
	}
}

// stopListening ends c's LISTEN within at most unlistenTimeout of ctx (a
// session that died unnoticed must leave the statement that follows most
// of its time), and tells whether c is still usable: if not, it is closed.
func (b *Backend) stopListening(ctx context.Context, c *pgx.Conn) bool {
	ctx, cancel := context.WithTimeout(ctx, unlistenTimeout)
	defer cancel()
	if _, err := c.Exec(ctx, "UNLISTEN *"); err != nil {
		discard(c)
		return false
	}
	return true
}

// sleep waits on c for a notification, or until left has passed: the
// holder's lease can have expired by then. It tells which came: a
// notification that came while a statement ran was buffered by pgx and
// ends the sleep at once.
func sleep(ctx context.Context, c *pgx.Conn, left time.Duration) (notified bool, err error) {
	wctx, cancel := context.WithTimeout(ctx, max(left, time.Millisecond))
	defer cancel()
	_, err = c.WaitForNotification(wctx)
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		return false, nil // the holder's expiry; pgx keeps the session usable
	}
	return err == nil, err
}

// waitFail is err, or the reason ctx ended when it did: the caller gave up
// waiting, which is not the server's fault.
func (b *Backend) waitFail(ctx context.Context, key string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("waiting for lock %q: %w", key, context.Cause(ctx))
	}
	return err
}
