package redis

import (
	"context"
	"fmt"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.Revoker = (*Backend)(nil)

// releasedRevoked is release.lua's and sem_release.lua's reply when the
// lease was revoked and its release freed the lock or slot.
const releasedRevoked = 2

// Revoke marks key's holder whose token is token (every holder when token
// is 0) revoked, in one script (lua/revoke.lua), keeping its lock or slot
// and its expiry: its next renewal fails with ErrLost, others find the
// key taken until its own release frees it or its lease ends. It returns
// an error wrapping backend.ErrLost when token is not 0 and no live holder
// has it.
func (b *Backend) Revoke(ctx context.Context, key string, token backend.Token) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	n := b.names(key)
	got, err := b.scripts.revoke.Run(ctx, b.client, n.with(n.lock, n.meta), token.String()).Int()
	if err != nil {
		return b.unavailable("revoke", key, err)
	}
	if got != 1 {
		return fmt.Errorf("%w: lock %q on redis %s has no holder with token %s", backend.ErrLost, key, b.url, token)
	}
	return nil
}

// revoked is the error of a revoked lease's release, which freed the lock.
func (l *lease) revoked() error {
	return fmt.Errorf("%w: lock %q on redis %s was revoked (token %s); released", backend.ErrLost, l.key, l.b.url, l.token)
}

// released is the error for n, a release script's reply.
func (l *lease) released(n int) error {
	switch n {
	case 1:
		return nil
	case releasedRevoked:
		return l.revoked()
	}
	return l.lost()
}
