package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/pgtest"
)

func TestRevoke(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	backendtest.RunRevoke(t, backendtest.Operators{Harness: backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, raw) },
		TTL:  time.Second,
	}})
}

// wantRevokedHolder checks that Inspect and List show key's holder of
// token with its own run id, revoked (or not, per want).
func wantRevokedHolder(t *testing.T, b *Backend, key string, token backend.Token, run string, want bool) {
	t.Helper()
	st, err := b.Inspect(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	listed, err := b.List(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	var views []backend.Status
	for _, s := range append([]backend.Status{st}, listed...) {
		views = append(views, s.All()...)
	}
	found := 0
	for _, h := range views {
		if h.Token != token {
			continue
		}
		found++
		if h.Revoked != want || h.RunID != run {
			t.Errorf("holder %d shows run %q, revoked %v; want run %q, revoked %v", token, h.RunID, h.Revoked, run, want)
		}
	}
	if found != 2 {
		t.Errorf("holder %d is in %d of Inspect and List, want both: %+v", token, found, views)
	}
}

// A revoke racing its holder's renew and release: exactly one of the
// revoke and the release reports the holder lost (whichever came second),
// a renew after the revoke fails, and the key ends free either way.
func TestRevokeRacesRenewAndRelease(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	holderSide, operator := open(t, raw), open(t, raw)
	for _, limit := range []int{1, 2} {
		for round := range 20 {
			key := fmt.Sprintf("k%d-%d", limit, round)
			l, err := holderSide.Acquire(t.Context(), key, semOpts("h", limit))
			if err != nil {
				t.Fatal(err)
			}
			var revokeErr, renewErr, releaseErr error
			var wg sync.WaitGroup
			wg.Go(func() { revokeErr = operator.Revoke(t.Context(), key, l.Token()) })
			wg.Go(func() {
				renewErr = l.Renew(t.Context())
				releaseErr = l.Release(t.Context())
			})
			wg.Wait()
			for _, err := range []error{revokeErr, renewErr, releaseErr} {
				if err != nil && !errors.Is(err, backend.ErrLost) {
					t.Fatalf("limit %d, round %d: %v", limit, round, err)
				}
			}
			if (revokeErr == nil) == (releaseErr == nil) {
				t.Errorf("limit %d, round %d: Revoke = %v, Release = %v; want exactly one lost", limit, round, revokeErr, releaseErr)
			}
			if renewErr != nil && revokeErr != nil {
				t.Errorf("limit %d, round %d: Renew = %v though the revoke came after the release", limit, round, renewErr)
			}
			st, err := operator.Inspect(t.Context(), key)
			if err != nil || st.Held {
				t.Errorf("limit %d, round %d: after the race the key is %+v, %v; want free", limit, round, st, err)
			}
		}
	}
}

// A revoked holder's release frees the lock at once although its minimum
// hold is not over: the break, not a schedule, ended its run.
func TestRevokedReleaseSkipsTheMinimumHold(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	for _, limit := range []int{1, 2} {
		for _, giveBack := range []bool{false, true} {
			key := fmt.Sprintf("k%d-%v", limit, giveBack)
			o := semOpts("h", limit)
			o.MinHold = time.Hour
			l, err := b.Acquire(t.Context(), key, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Revoke(t.Context(), key, 0); err != nil {
				t.Fatal(err)
			}
			end := l.Release
			if giveBack {
				end = l.(backend.GiveBacker).GiveBack
			}
			if err := end(t.Context()); !errors.Is(err, backend.ErrLost) {
				t.Errorf("limit %d: the revoked holder's release = %v, want ErrLost", limit, err)
			}
			next, err := b.Acquire(t.Context(), key, semOpts("next", limit))
			if err != nil {
				t.Fatalf("limit %d: Acquire after the revoked holder released (min hold 1h): %v", limit, err)
			}
			if next.Token() <= l.Token() {
				t.Errorf("token %d after %d", next.Token(), l.Token())
			}
			release(t, next)
		}
	}
}

// Revoke of every holder marks each live one, leaves a second revoke as
// it was, and Inspect and List show the run ids without the mark.
func TestRevokeEveryHolderOfASemaphore(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	var held []backend.Lease
	var runs []string
	for _, h := range []string{"a", "b"} {
		o := semOpts(h, 3)
		l, err := b.Acquire(t.Context(), "k", o)
		if err != nil {
			t.Fatal(err)
		}
		held, runs = append(held, l), append(runs, o.RunID)
	}
	for range 2 {
		if err := b.Revoke(t.Context(), "k", 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Revoke(t.Context(), "k", held[1].Token()); err != nil {
		t.Errorf("Revoke of a holder already revoked = %v, want nil: it still holds", err)
	}
	for i, l := range held {
		wantRevokedHolder(t, b, "k", l.Token(), runs[i], true)
		if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Errorf("Renew of revoked holder %d = %v, want ErrLost", l.Token(), err)
		}
	}
	c, err := b.Acquire(t.Context(), "k", semOpts("c", 3))
	if err != nil {
		t.Fatalf("the free third slot: %v", err)
	}
	wantRevokedHolder(t, b, "k", c.Token(), c.(*lease).runID, false)
	for _, l := range held {
		if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Errorf("Release of revoked holder %d = %v, want ErrLost", l.Token(), err)
		}
	}
	release(t, c)
}

// The revoked mark is in the row, so it survives a server restart: the
// holder still cannot renew, others still find the key taken, and its
// release still frees it.
func TestRevokedHolderSurvivesARestart(t *testing.T) {
	srv := pgtest.Start(t)
	b := open(t, srv.URL())
	o2 := func(limit int) backend.AcquireOptions {
		o := semOpts("h2", limit)
		o.TTL = time.Minute
		return o
	}
	var held []backend.Lease
	for i, limit := range []int{1, 2} {
		o := semOpts("h", limit)
		o.TTL = time.Minute
		l, err := b.Acquire(t.Context(), fmt.Sprint("k", i), o)
		if err != nil {
			t.Fatal(err)
		}
		if limit > 1 { // fill the semaphore: only the revoked slot can free
			if _, err := b.Acquire(t.Context(), fmt.Sprint("k", i), o2(limit)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Revoke(t.Context(), fmt.Sprint("k", i), l.Token()); err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	srv.Restart()
	for i, l := range held {
		key := fmt.Sprint("k", i)
		err := l.Renew(t.Context())
		for try := 0; try < maxIdle && errors.Is(err, backend.ErrUnavailable); try++ {
			err = l.Renew(t.Context()) // each pooled session the restart cut fails once
		}
		if !errors.Is(err, backend.ErrLost) {
			t.Errorf("%s: Renew of the revoked holder after a restart = %v, want ErrLost", key, err)
		}
		wantRevokedHolder(t, b, key, l.Token(), l.(*lease).runID, true)
		if _, err := b.Acquire(t.Context(), key, semOpts("other", []int{1, 2}[i])); !errors.Is(err, backend.ErrHeld) {
			t.Errorf("%s: Acquire of the revoked holder's lock after a restart = %v, want ErrHeld", key, err)
		}
		if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Errorf("%s: the revoked holder's Release after a restart = %v, want ErrLost", key, err)
		}
		next, err := b.Acquire(t.Context(), key, semOpts("other", []int{1, 2}[i]))
		if err != nil || next.Token() <= l.Token() {
			t.Fatalf("%s: Acquire after the revoked holder released = %v, %v; want a token above %d", key, next, err, l.Token())
		}
	}
}

// oldestRenew is the renew statement of a lockrun from before minimum
// holds: it checks run id, token and expiry only.
const oldestRenew = `UPDATE %s SET expires_at = now() + $4::bigint * interval '1 microsecond'
WHERE key = $1 AND run_id = $2 AND token = $3 AND expires_at > now()`

// An older lockrun's row (no mark) reads as not revoked; revoked, the
// older lockrun loses it at its next renewal, and its lock stays taken
// until its lease ends (its release does not match the marked run id).
func TestOlderLockrunIsRevoked(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	c, err := b.conns.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer b.conns.put(c)
	if _, err := b.Acquire(t.Context(), "warm", opts("warm")); err != nil { // creates the table
		t.Fatal(err)
	}
	var tok backend.Token
	var holder, run string
	var left, server int64
	var ours bool
	err = c.QueryRow(t.Context(), prevAcquire(t, b), "k", "old-host", "old-run", int64(time.Minute/time.Microsecond), `{"user":"old"}`).
		Scan(&tok, &holder, &run, &left, &ours, &server)
	if err != nil || !ours {
		t.Fatalf("older acquire: %v, ours %v", err, ours)
	}
	wantRevokedHolder(t, b, "k", tok, "old-run", false)
	if err := b.Revoke(t.Context(), "k", tok); err != nil {
		t.Fatal(err)
	}
	wantRevokedHolder(t, b, "k", tok, "old-run", true)
	tag, err := c.Exec(t.Context(), fmt.Sprintf(oldestRenew, b.Table()), "k", "old-run", tok, int64(time.Minute/time.Microsecond))
	if err != nil || tag.RowsAffected() != 0 {
		t.Errorf("an older lockrun's renew after Revoke: %v, %d rows; want none: it must lose the lock", err, tag.RowsAffected())
	}
	if _, err := b.Acquire(t.Context(), "k", opts("new")); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("Acquire of an older lockrun's revoked lock = %v, want ErrHeld", err)
	}
}
