package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
)

// encodeInfo is the holder's info as the info column keeps it.
func encodeInfo(info backend.HolderInfo) string {
	b, _ := json.Marshal(info) // strings only: cannot fail
	return string(b)
}

// record is the part of a row that inspect.sql and list.sql read beyond
// the Status fields; a table upgraded from an older lockrun has NULLs.
type record struct {
	left             int64
	granted, renewed *time.Time
	info             *string
	now              int64 // the server's clock, µs
}

// scan reads one row of inspect.sql or list.sql (after the key) into st
// and r.
func (r *record) scan(row pgx.Row, st *backend.Status, dest ...any) error {
	dest = append(dest, &st.Token, &st.Holder, &st.RunID, &st.Held, &r.left, &r.granted, &r.renewed, &r.info, &r.now)
	return row.Scan(dest...)
}

// fill puts the record into the status of a held key: a semaphore's
// holders, live by the server's clock, when its row is one (run_id empty).
func (r *record) fill(st *backend.Status) {
	if st.RunID == "" {
		*st = decodeSemaphore(r.info).status(st.Key, st.Token, r.now)
		return
	}
	st.RunID, st.Revoked = cutRevoked(st.RunID)
	st.TTL = time.Duration(r.left) * time.Microsecond
	if r.granted != nil {
		st.Since = *r.granted
	}
	if r.renewed != nil {
		st.Renewed = *r.renewed
	}
	if r.info != nil {
		_ = json.Unmarshal([]byte(*r.info), &st.Info) // a damaged record shows no info
	}
}

// List reports the live leases of the keys that start with prefix, sorted
// by key, in one statement. A table not created yet holds nothing.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Status, error) {
	if prefix != "" {
		if err := backend.ValidateKey(prefix); err != nil {
			return nil, err
		}
	}
	var held []backend.Status
	err := b.session(ctx, func(ctx context.Context, c *pgx.Conn) error {
		rows, err := c.Query(ctx, b.sql.list, prefix)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var st backend.Status
			var r record
			if err := r.scan(rows, &st, &st.Key); err != nil {
				return err
			}
			if r.fill(&st); st.Held {
				held = append(held, st)
			}
		}
		return rows.Err()
	})
	if isMissingTable(err) {
		return nil, nil
	}
	if err != nil {
		return nil, b.fail(fmt.Sprintf("listing locks %q", prefix), err)
	}
	// Sorted here: the server would sort by its collation, not by bytes.
	slices.SortFunc(held, func(a, b backend.Status) int { return strings.Compare(a.Key, b.Key) })
	return held, nil
}
