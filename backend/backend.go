// Package backend defines the contract between lockrun and the stores that
// hold its locks: a Backend hands out Leases, each carrying a fencing Token
// that is strictly greater than every token issued before it for the key.
package backend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Sentinel errors. Backends wrap them with the key or address that explains
// them; callers compare with errors.Is.
var (
	// ErrHeld means the lock is held by someone else. Errors that wrap it
	// are usually a *HeldError that names the holder.
	ErrHeld = errors.New("lock is held")
	// ErrLost means this lease is no longer the owner: another holder, or
	// none, is recorded for the key.
	ErrLost = errors.New("lock ownership lost")
	// ErrUnavailable means the backend could not be reached or refused to
	// serve; the operation may succeed later.
	ErrUnavailable = errors.New("backend unavailable")
	// ErrInvalidKey means a key does not follow the rules of ValidateKey.
	ErrInvalidKey = errors.New("invalid key")
	// ErrInvalidURL means a backend URL cannot be used.
	ErrInvalidURL = errors.New("invalid backend URL")
	// ErrInvalidOptions means AcquireOptions break the rules of
	// ValidateRequest.
	ErrInvalidOptions = errors.New("invalid acquire options")
	// ErrPermission means the backend refused who we are or what we asked:
	// a wrong password, an unknown role, an ACL, a file we may not write.
	// Retrying will not help; lockrun exits 77 (EX_NOPERM).
	ErrPermission = errors.New("permission denied")
	// ErrConfig means the backend is reachable but not set up for lockrun
	// as configured: a missing database, a lease table of another shape, a
	// wrong server kind. Retrying will not help; lockrun exits 78
	// (EX_CONFIG).
	ErrConfig = errors.New("backend configuration error")
)

// Token is a fencing token: per key, every token a backend issues is
// strictly greater than all tokens it issued before.
type Token uint64

// String formats the token in decimal, as the child sees it.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// Backend is a store of leases. Implementations are safe for concurrent use.
type Backend interface {
	// Acquire takes the lock on key. Without o.Wait it tries once and
	// returns an error wrapping ErrHeld when someone else holds the lock.
	// With o.Wait it blocks until the lock is taken or ctx ends, and wakes
	// as soon as the holder releases or its lease can have expired.
	Acquire(ctx context.Context, key string, o AcquireOptions) (Lease, error)
	// Inspect reports who holds key, without taking or changing anything.
	Inspect(ctx context.Context, key string) (Status, error)
	// ForceRelease breaks the lock on key whoever holds it; the current
	// holder's next renewal fails with ErrLost (see Lease.Renew for leases
	// that watch). It never lowers the token.
	ForceRelease(ctx context.Context, key string) error
	// Close releases the backend's connections; leases it handed out must
	// not be used afterwards.
	Close() error
}

// Lease is one holder's ownership of one key.
type Lease interface {
	// Token is the fencing token issued with this lease.
	Token() Token
	// TTL is the lease length the server granted; it is never shorter than
	// the TTL that was asked for.
	TTL() time.Duration
	// Start is a local time no later than the moment the server began
	// counting the current TTL: the lease cannot expire before
	// Start().Add(TTL()) on a clock that runs at the local rate.
	Start() time.Time
	// Renew extends the lease by its TTL from about now. It returns an
	// error wrapping ErrLost when another owner, or none, is recorded. A
	// lease that watches its record (one with a Done method, closed when
	// the watch sees the lock lost: etcd's) learns of a break by another
	// party (ForceRelease, ReleaseHolder, Revoke) from its watch: a renewal
	// in the moment before the watch delivers still succeeds; the renewal
	// after Done closes fails.
	Renew(ctx context.Context) error
	// Release gives the lock up if this lease still owns it; it never
	// removes someone else's lock. Releasing a lost lease returns an error
	// wrapping ErrLost.
	Release(ctx context.Context) error
}

// AcquireOptions say how a lease is taken.
type AcquireOptions struct {
	TTL    time.Duration // lease length; the server may grant more, never less
	Holder string        // who is taking the lock, e.g. "host:pid"
	RunID  string        // unique per run, required, no blanks; recorded beside the holder
	Wait   bool          // block until the lock is taken or ctx ends
	// MinHold keeps the lock taken until at least the grant plus MinHold,
	// even when the lease is released sooner (cron on a fleet: a fast job
	// must not run again on a host whose cron fires a little later).
	// Release then leaves the key held by this lease's holder until that
	// time, on the store's own expiry; 0 releases at once.
	MinHold time.Duration
	Info    HolderInfo // recorded with the lease for status and list
	// Limit makes key a semaphore: up to Limit holders at once, each with
	// its own lease and token (see LimitError). 0 and 1 are a plain lock.
	Limit int
	// Granting, if set, is called by a backend that records a grant on
	// this machine (the file backend's plain locks) once it has taken the
	// lock and decided to grant it, before it writes and syncs the grant's
	// record, so that the caller can ready what the grant is for beside
	// that write. It runs on the goroutine that holds the lock: it must
	// not block, nor touch the key. Each Acquire calls it at most once,
	// never on a busy answer; the grant may still fail after it. (A func:
	// AcquireOptions values do not compare with ==.)
	Granting func()
	// StartWithin, if positive, lets a waiter's lease count from the last
	// restart of its TTL before its turn (its grant, or a renewal while it
	// waited) when that was sent at most StartWithin before the turn,
	// instead of restarting the TTL once more at the turn: a backend that
	// keeps a waiter's lease alive while it waits (etcd) then spares the
	// hand-off a request. Lease.Start says which; 0 always restarts.
	StartWithin time.Duration
}

// HolderInfo is what a holder records about itself for operators. Stores
// keep it as given; anything printed from it must go through Escape.
type HolderInfo struct {
	User    string `json:"user,omitempty"`    // the OS user that runs lockrun
	Command string `json:"command,omitempty"` // the command line, shell-quoted, possibly shortened
	CIURL   string `json:"ci_url,omitempty"`  // the CI job's URL when run by a CI system
}

// Status describes a key as Inspect sees it.
type Status struct {
	Key    string
	Held   bool
	Holder string        // empty when not held
	RunID  string        // empty when not held
	Token  Token         // the holder's token, or the last one issued when free
	TTL    time.Duration // lease time left when held and known; 0 otherwise
	// Since is when the current holder was granted the lock, and Renewed
	// when it last renewed (Since until then); zero when not held or not
	// known.
	Since, Renewed time.Time
	Info           HolderInfo // the holder's record; empty when not held
	// Revoked means the holder was revoked (Revoker) and is stopping: its
	// lock stays taken until it releases or its lease ends.
	Revoked bool
	// Limit is the key's limit while it is held as a semaphore (more than
	// 1); 0 for a plain lock and for a free key.
	Limit int
	// Holders is every holder of a semaphore, oldest token first, each
	// described as a held plain lock would be (Key, Held, Holder, RunID,
	// Token, TTL, Since, Renewed, Info); the fields above repeat
	// Holders[0]. It is nil for a plain lock and for a free key. For a
	// semaphore that is not full, Held is true and the key takes more
	// holders: Held means "has holders", not "Acquire would fail".
	Holders []Status
}

// HeldError is returned by Acquire when the lock is taken; it wraps ErrHeld.
type HeldError struct {
	Status Status
}

// Error names the key and, when known, its holder (escaped: the store's
// text may come from anyone), token and time left.
func (e *HeldError) Error() string {
	s := e.Status
	if s.Limit > 1 {
		return fmt.Sprintf("lock %q is held by %d of %d holders (--limit %d)", s.Key, len(s.Holders), s.Limit, s.Limit)
	}
	msg := fmt.Sprintf("lock %q is held", s.Key)
	if s.Holder != "" {
		msg += " by " + Escape(s.Holder)
	}
	if s.Token != 0 {
		msg += " (token " + s.Token.String()
		if s.TTL > 0 {
			msg += ", " + s.TTL.Round(time.Millisecond).String() + " left"
		}
		msg += ")"
	}
	return msg
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Starter is implemented by leases that leave work for after their
// command has started: bookkeeping that a grant could do at once, but
// that would then compete for the machine with the start of the command,
// the end of a hand-off. A caller that runs a command under the lease
// calls Started once it runs; a lease not told does the work later (at
// its first renewal or its release, or after a bounded time).
type Starter interface {
	// Started is told, once, that the command runs. It does not block.
	Started()
}

// Started tells l that its command runs, if l is a Starter.
func Started(l Lease) {
	if s, ok := l.(Starter); ok {
		s.Started()
	}
}

// GiveBacker is implemented by the leases of every backend that honours
// AcquireOptions.MinHold.
type GiveBacker interface {
	// GiveBack frees the lock at once, minimum hold or not, if this lease
	// still owns it: for a lease that was never used (its command did not
	// start), whose minimum would only keep every other holder out of a
	// schedule that nobody ran. It is owner-checked and atomic as Release
	// is, and wakes the next waiter; a lost lease returns an error
	// wrapping ErrLost.
	GiveBack(ctx context.Context) error
}

// GiveBack frees l at once: through its GiveBack method, or through
// Release on a lease that has none (it keeps no minimum hold).
func GiveBack(ctx context.Context, l Lease) error {
	if g, ok := l.(GiveBacker); ok {
		return g.GiveBack(ctx)
	}
	return l.Release(ctx)
}
