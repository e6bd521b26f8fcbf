package backend

import "context"

// Revoker is a backend that breaks a holder without handing its lock on
// while the holder's command may still run: `lockrun release`. ForceRelease
// and ReleaseHolder free the lock at once, which lets a waiter start beside
// a broken command that has not heard of the break yet (until its next
// renewal and kill grace, or a TTL if its lockrun is frozen); Revoke does
// not.
type Revoker interface {
	// Revoke breaks the hold of key's holder whose token is token, or of
	// every holder when token is 0, atomically on the server: their next
	// renewals fail with ErrLost, so their lockruns stop their commands and
	// then Release (see Lease.Renew for leases that watch). Until a
	// revoked holder releases (owner-checked; it frees the lock or slot at
	// once, whatever its MinHold, and returns an error wrapping ErrLost)
	// or its lease ends on its own, its lock or slot stays taken: Acquire
	// by others reports it held, waiters go on waiting, and Inspect shows
	// it with Revoked set. When token is not 0 and no
	// live holder has it, Revoke changes nothing and returns an error
	// wrapping ErrLost. It never lowers the token.
	Revoke(ctx context.Context, key string, token Token) error
}
