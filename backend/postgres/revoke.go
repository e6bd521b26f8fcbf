package postgres

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.Revoker = (*Backend)(nil)

// revokedMark is the suffix sql/revoke.sql appends to a revoked holder's
// run id (the SQL spells it out too). Run ids have no blanks, so a marked
// one matches no run: the holder's renewals, an older lockrun's included,
// fail on it, and no other column or table is needed.
const revokedMark = " revoked"

// cutRevoked is the run id of a holder as recorded, without its revoked
// mark, and whether it had one. A record of an older lockrun has none.
func cutRevoked(run string) (string, bool) {
	return strings.CutSuffix(run, revokedMark)
}

// Revoke marks key's live holder whose token is token, or every live
// holder when token is 0, as revoked, in one statement that keeps its
// record, token and expiry (see sql/revoke.sql): its next renewal fails
// with ErrLost, the lock or slot stays taken until it releases (then at
// once) or its lease ends, and waiters are not woken. With token not 0 and
// no live holder of it, or no table, it changes nothing and returns an
// error wrapping ErrLost.
func (b *Backend) Revoke(ctx context.Context, key string, token backend.Token) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	lost := fmt.Errorf("%w: lock %q: no live holder has token %s", backend.ErrLost, key, token)
	if token > math.MaxInt64 { // beyond the token column: never issued
		return lost
	}
	var rows int64
	err := b.session(ctx, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, b.sql.revoke, key, int64(token)).Scan(&rows)
	})
	switch {
	case isMissingTable(err), err == nil && rows == 0:
		if token == 0 {
			return nil // nobody holds it: nothing to revoke
		}
		return lost
	case err != nil:
		return b.fail(fmt.Sprintf("revoking holder %s of lock %q", token, key), err)
	}
	return nil
}
