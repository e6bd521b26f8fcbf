package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
)

// lease is one run's hold on one key, identified on the server by the run
// id and the token together.
type lease struct {
	b     *Backend
	key   string
	runID string
	token backend.Token
	ttl   time.Duration
	start time.Time
	// minHold keeps the row this run's until the grant plus minHold, even
	// when released sooner.
	minHold time.Duration
	skew    time.Duration // the server's clock ahead of ours at the grant, at least
	// semaphore is set for a slot of a semaphore, whose statements differ
	// (see sql/sem_acquire.sql).
	semaphore bool

	mu       sync.Mutex
	leftover *leftover     // a wait's, until tidied (see Started)
	settled  chan struct{} // closed once tidied and warmed; nil before (see settle)
}

func (l *lease) Token() backend.Token { return l.token }
func (l *lease) TTL() time.Duration   { return l.ttl }

// Start is the local time just before the acquiring statement was sent.
func (l *lease) Start() time.Time { return l.start }

// ClockSkew is how far the server's clock was at least ahead of the local
// one (negative: behind) when the lease was granted: the lease expires on
// the server's clock, so a step of that clock moves the expiry.
func (l *lease) ClockSkew() (time.Duration, bool) { return l.skew, true }

// Renew extends the lease by its TTL from the server's now, only if this
// run still holds it and it has not expired; see sql/renew.sql.
func (l *lease) Renew(ctx context.Context) error {
	l.tidy(ctx, true)
	sql := l.b.sql.renew
	if l.semaphore {
		sql = l.b.sql.semRenew
	}
	return l.owned(ctx, "renewing", sql, l.key, l.runID, l.token, l.ttl.Microseconds())
}

// Release frees the lock if this run still holds it and wakes the key's
// waiters in the same statement; see sql/release.sql.
func (l *lease) Release(ctx context.Context) error {
	return l.release(ctx, l.minHold)
}

// GiveBack frees the lock at once, minimum hold or not, if this run still
// holds it, and wakes the key's waiters.
func (l *lease) GiveBack(ctx context.Context) error { return l.release(ctx, 0) }

// release runs sql/release.sql (a semaphore's: sql/sem_release.sql) with
// a minimum hold of hold (0: none). A revoked lease is freed all the same,
// at once, and reported lost: its holder did not end on its own terms.
func (l *lease) release(ctx context.Context, hold time.Duration) error {
	l.tidy(ctx, true)
	sql, bare := l.b.sql.release, l.b.sql.releaseBare
	if l.semaphore {
		sql, bare = l.b.sql.semRelease, l.b.sql.semReleaseBare
	}
	var found, revoked, queued bool
	err := l.b.session(ctx, func(ctx context.Context, c *pgx.Conn) error {
		var notified string
		args := []any{l.key, l.runID, l.token, channel(l.b.table, l.key), hold.Microseconds(), frontID(l.b.table, l.key)}
		err := c.QueryRow(ctx, sql, args...).Scan(&revoked, &notified, &queued)
		if hintRefused(err) { // the question, not the release: ask without it
			err = c.QueryRow(ctx, bare, args...).Scan(&revoked, &notified, &queued)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = err == nil
		return err
	})
	if queued {
		l.b.handedOn.Store(true)
	}
	if err == nil && revoked {
		return fmt.Errorf("%w: lock %q: run %s (token %s) was revoked (lockrun release); its hold is now freed",
			backend.ErrLost, l.key, l.runID, l.token)
	}
	return l.outcome("releasing", err, found)
}

// hintRefused tells whether err may come from the release's question
// whether someone waits (sql.queuedHint) rather than from the release:
// the function missing or not granted, or the server's lock table full.
// The statement is then retried without it: a lockrun that never waits
// needs no advisory lock, and must not fail to release for want of one.
func hintRefused(err error) bool {
	code := pgCode(err)
	return code == codeUndefinedFunction || code == codeInsufficientPrivilege || strings.HasPrefix(code, codeClassResources)
}

// owned runs an owner-checked statement: no row touched, or no table at
// all, proves the lease is gone.
func (l *lease) owned(ctx context.Context, what, sql string, args ...any) error {
	var rows int64
	err := l.b.session(ctx, func(ctx context.Context, c *pgx.Conn) error {
		tag, err := c.Exec(ctx, sql, args...)
		rows = tag.RowsAffected()
		return err
	})
	return l.outcome(what, err, rows > 0)
}

// outcome is the error of an owner-checked statement that ended with err
// and found the lease (or not).
func (l *lease) outcome(what string, err error, found bool) error {
	switch {
	case isMissingTable(err):
		return fmt.Errorf("%w: lock %q: table %s was dropped", backend.ErrLost, l.key, l.b.Table())
	case err != nil:
		return l.b.fail(fmt.Sprintf("%s lock %q", what, l.key), err)
	case !found:
		return fmt.Errorf("%w: lock %q: run %s (token %s) no longer holds it: released, broken, revoked or expired on the server",
			backend.ErrLost, l.key, l.runID, l.token)
	}
	return nil
}
