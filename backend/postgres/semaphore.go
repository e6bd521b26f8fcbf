package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.HolderReleaser = (*Backend)(nil)

// semState is a semaphore's row as its info column keeps it (see
// sql/sem_acquire.sql): the key's limit and every holder's lease, live or
// not yet pruned. Its run_id is empty, which no lease's is.
type semState struct {
	Limit   int        `json:"limit"`
	Holders []semEntry `json:"holders"`
}

// semEntry is one holder's lease; times are microseconds since the Unix
// epoch on the server's clock.
type semEntry struct {
	Run      string             `json:"run"`
	Token    backend.Token      `json:"token"`
	Holder   string             `json:"holder"`
	Exp      int64              `json:"exp"`
	Granted  int64              `json:"granted"`
	Renewed  int64              `json:"renewed"`
	Released bool               `json:"released,omitempty"`
	Info     backend.HolderInfo `json:"info"`
}

// status describes the key with the holders of s that are live at now
// (the server's clock, µs), oldest token first, the top-level fields
// repeating the first; with none it is free, with the key's last token.
func (s semState) status(key string, last backend.Token, now int64) backend.Status {
	var holders []backend.Status
	for _, e := range s.Holders {
		if e.Exp > now {
			holders = append(holders, e.status(key, now))
		}
	}
	if len(holders) == 0 {
		return backend.Status{Key: key, Token: last}
	}
	slices.SortFunc(holders, func(a, b backend.Status) int { return cmp.Compare(a.Token, b.Token) })
	st := holders[0]
	st.Limit, st.Holders = s.Limit, holders
	return st
}

func (e semEntry) status(key string, now int64) backend.Status {
	run, revoked := cutRevoked(e.Run)
	return backend.Status{
		Key: key, Held: true, Holder: e.Holder, RunID: run, Token: e.Token, Revoked: revoked,
		TTL:   time.Duration(e.Exp-now) * time.Microsecond,
		Since: time.UnixMicro(e.Granted), Renewed: time.UnixMicro(e.Renewed),
		Info: e.Info,
	}
}

// decodeSemaphore reads a semaphore's info column; a damaged one shows
// no holders.
func decodeSemaphore(info *string) semState {
	var s semState
	if info != nil {
		_ = json.Unmarshal([]byte(*info), &s)
	}
	return s
}

// trySemaphore takes a slot of key, a semaphore of o's limit, in one
// statement (see sql/sem_acquire.sql), as tryAcquire does for a plain
// lock: a lease only for a grant the statement wrote, a *backend.HeldError
// naming every holder when the semaphore is full, and a
// *backend.LimitError when the key is held with another limit.
func (b *Backend) trySemaphore(ctx context.Context, c *pgx.Conn, key string, o backend.AcquireOptions) (*lease, error) {
	ttl, limit := roundUp(o.TTL), o.EffectiveLimit()
	for range raceRetries {
		var ours, retry bool
		var token backend.Token
		var have int
		var holders string
		var server int64
		var start time.Time
		err := b.retryMissingTable(ctx, c, func() error {
			start = time.Now()
			return c.QueryRow(ctx, b.sql.semAcquire, key, o.Holder, o.RunID, ttl.Microseconds(), encodeInfo(o.Info), limit).
				Scan(&ours, &token, &have, &holders, &server, &retry)
		})
		end := time.Now()
		switch {
		case err != nil:
			return nil, tokenRange(err)
		case ours: // this statement started the lease's TTL, after start
			skew := backend.Skew(start, end, time.UnixMicro(server))
			return &lease{b: b, key: key, runID: o.RunID, token: token, ttl: ttl, start: start, skew: skew, minHold: o.MinHold, semaphore: true}, nil
		case retry:
			continue // a concurrent statement changed the row first
		case have != limit:
			return nil, &backend.LimitError{Key: key, Want: limit, Have: have}
		}
		s := semState{Limit: have}
		_ = json.Unmarshal([]byte(holders), &s.Holders) // the server's jsonb: well formed
		return nil, &backend.HeldError{Status: s.status(key, 0, server)}
	}
	return nil, &backend.HeldError{Status: backend.Status{Key: key, Held: true}}
}

// ReleaseHolder breaks the holder of key whose token is token, in one
// statement that wakes the key's waiters (see sql/release_holder.sql):
// one slot of a semaphore, or a plain lock whose token it is. No live
// holder with that token, or no table, is an error wrapping ErrLost.
func (b *Backend) ReleaseHolder(ctx context.Context, key string, token backend.Token) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	lost := fmt.Errorf("%w: lock %q: no live holder has token %s", backend.ErrLost, key, token)
	if token > math.MaxInt64 { // beyond the token column: never issued
		return lost
	}
	var rows int64
	err := b.session(ctx, func(ctx context.Context, c *pgx.Conn) error {
		tag, err := c.Exec(ctx, b.sql.releaseHolder, key, token, channel(b.table, key))
		rows = tag.RowsAffected()
		return err
	})
	switch {
	case isMissingTable(err), err == nil && rows == 0:
		return lost
	case err != nil:
		return b.fail(fmt.Sprintf("releasing holder %s of lock %q", token, key), err)
	}
	return nil
}
