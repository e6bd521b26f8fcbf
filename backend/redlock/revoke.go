package redlock

import (
	"context"
	"fmt"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.Revoker = (*Backend)(nil)

// releasedRevoked is release.lua's and sem_release.lua's reply on a
// master where the lease was revoked and its release freed it.
const releasedRevoked = 2

// freed tells a release script's reply that freed (or left to end) the
// lease's lock or slot on its master.
func freed(n int64) bool { return n == 1 || n == releasedRevoked }

// Revoke marks, on every master that answers, key's holder whose token is
// token (every holder when token is 0) revoked, keeping its lock or slot
// and its expiry there (lua/revoke.lua): its renewal fails on each of
// them, others find the key taken until its own release frees it or its
// lease ends. Fewer than a majority answering is an error: the holder
// might still renew on a majority. When token is not 0 and no master has
// a live holder with it, the error wraps backend.ErrLost.
func (b *Backend) Revoke(ctx context.Context, key string, token backend.Token) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	n := b.names(key)
	// Every master is waited for (no early decision): a master left
	// unmarked is one where the holder can still renew.
	rs := fanout(ctx, b.masters, func(ctx context.Context, m *master) (int64, error) {
		return b.scripts.revoke.Run(ctx, m.client, n.with(n.endedKeys(n.lock, n.record)...), token.String(), millis(endedKeep)).Int64()
	}, nil)
	if got := answered(rs); got < b.quorum {
		return b.noQuorum("revoke", key, got, errorsOf(rs))
	}
	if marked, _, _ := tally(rs, ours); marked == 0 && token != 0 {
		return fmt.Errorf("%w: lock %q on redlock %s has no holder with token %s", backend.ErrLost, key, b.url, token)
	}
	return nil
}

// releaseOutcome is the error of a release whose masters answered rs: as
// outcome's, except that a lease revoked on any master that it freed
// returns an error wrapping backend.ErrLost, saying so.
func (l *lease) releaseOutcome(rs []reply[int64]) error {
	if yes, _, _ := tally(rs, freed); yes >= l.b.quorum {
		if revoked, _, _ := tally(rs, func(n int64) bool { return n == releasedRevoked }); revoked > 0 {
			return fmt.Errorf("%w: lock %q on redlock %s was revoked (token %s); released", backend.ErrLost, l.key, l.b.url, l.token)
		}
		return nil
	}
	return l.outcomeOf("release", rs, freed)
}
