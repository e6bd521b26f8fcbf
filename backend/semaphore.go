package backend

import (
	"context"
	"errors"
	"fmt"
)

// MaxLimit is the largest AcquireOptions.Limit every backend accepts.
const MaxLimit = 1000

// A semaphore is a key that up to Limit holders hold at once (consul
// lock -n, a shared flock): "at most 2 deploys", "at most 4 backfill
// shards". Each holder has a lease of its own, renewed, lost and released
// on its own, with a fencing token that is strictly greater than every
// token issued before for the key, to any of its holders. A plain lock is
// a semaphore of limit 1, and the two exclude each other: a key is held
// either way at a time, with one limit (see LimitError).

// ErrLimitMismatch means the key is held, or awaited, with another limit
// than the one asked for. Errors that wrap it are a *LimitError;
// errors.Is(err, ErrConfig) is true of them too: lockrun exits 78.
var ErrLimitMismatch = errors.New("lock is held with another limit")

// LimitError is returned by Acquire when the key's holders (or, where the
// store queues them, its waiters) use another limit than the one asked
// for. Mixing limits would let more holders in than one of them allows.
type LimitError struct {
	Key        string
	Want, Have int // the limit asked for and the key's; 1 is a plain lock
}

// Error says which limits clash and what to do.
func (e *LimitError) Error() string {
	return fmt.Sprintf("lock %q is in use with --limit %d, not %d: every lockrun on a key must ask for the same limit",
		e.Key, e.Have, e.Want)
}

// Is makes errors.Is true for ErrLimitMismatch and ErrConfig.
func (e *LimitError) Is(target error) bool { return target == ErrLimitMismatch || target == ErrConfig }

// EffectiveLimit is o's limit, with 0 read as 1 (a plain lock).
func (o AcquireOptions) EffectiveLimit() int { return max(o.Limit, 1) }

// HolderReleaser is a backend that breaks one holder of a key, leaving the
// others: `lockrun release KEY --holder`. Every backend implements it.
type HolderReleaser interface {
	// ReleaseHolder breaks the hold of key's holder whose token is token,
	// atomically on the server, whoever that holder is: its next renewal
	// fails with ErrLost (see Lease.Renew for leases that watch), and the
	// slot goes to the next waiter. When no
	// live holder of key has that token it changes nothing and returns an
	// error wrapping ErrLost. It never lowers the token.
	ReleaseHolder(ctx context.Context, key string, token Token) error
}

// All is every holder of the key as s describes it, oldest token first:
// s.Holders for a semaphore, s itself for a held plain lock, none when free.
func (s Status) All() []Status {
	switch {
	case len(s.Holders) > 0:
		return s.Holders
	case s.Held:
		return []Status{s}
	}
	return nil
}

// HoldsToken reports whether one of the key's holders has token t.
func (s Status) HoldsToken(t Token) bool {
	for _, h := range s.All() {
		if h.Token == t {
			return true
		}
	}
	return false
}
