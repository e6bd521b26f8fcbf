package file

import (
	"context"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.Revoker = (*Backend)(nil)

// Revoke breaks the hold of key's holder of token, or of every holder when
// token is 0, by writing its run's revocation record: its next renewal
// fails with ErrLost (and its lockrun hears of it at once, see Done), a
// min-hold of its record ends. On this backend that is what ForceRelease
// and ReleaseHolder do already, and it never hands the lock on early: the
// flock, held by the holder's command too, keeps the lock or slot taken
// until the revoked holder releases it or dies with its command, whatever
// the TTL. A holder kept only by its min-hold has no command left: its
// lock is free at once. Inspect shows a revoked holder that still holds
// the flock with Revoked set; the revocation record is marked as Revoke's
// (revocation.Kept), so that a semaphore holder broken by ReleaseHolder or
// ForceRelease is left out of Inspect as before.
func (b *Backend) Revoke(ctx context.Context, key string, token backend.Token) error {
	if token == 0 {
		return b.revokeAll(ctx, key, true)
	}
	return b.revokeToken(ctx, key, token, true)
}

// beforeRevoking runs between a revoker's read of the holder and its write
// of the revocation record: a test holds it there to race two revokers.
var beforeRevoking = func() {}
