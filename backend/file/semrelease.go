package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.HolderReleaser = (*Backend)(nil)

// semaphoreHeld returns a *LimitError when a semaphore's holders or
// waiters share the flock of f, key's lock file, that a plain acquirer
// could not take; nil when a plain holder has it. While the key's record
// is still a plain lock's, the sharer is a semaphore's first grant: its
// record (with its limit) comes within milliseconds, and is waited for a
// little; a *HeldError if it does not come.
func semaphoreHeld(key string, f *os.File) error {
	for i := 0; ; i++ {
		_, held, shared, err := flockHolder(f)
		if err != nil || !held || !shared {
			return nil
		}
		r, _, err := readState(f)
		switch {
		case err == nil && r.Limit > 1:
			return &backend.LimitError{Key: key, Want: 1, Have: r.Limit}
		case i == 50:
			return &backend.HeldError{Status: backend.Status{Key: key, Held: true}}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// plainWaitable returns nil when a plain acquirer of key may wait in
// flock(2) on f; a *LimitError (or *HeldError) when a semaphore holds the
// key. On nil, f is marked as a plain waiter's (markPlainWaiter): the
// caller unmarks it once it got the flock or gave up.
func plainWaitable(key string, f *os.File) error {
	if err := markPlainWaiter(f); err != nil {
		return fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	if err := semaphoreHeld(key, f); err != nil {
		unmarkPlainWaiter(f)
		return err
	}
	return nil
}

// semaphoreOver returns a *LimitError when a slot of key's semaphore of
// limit n is still taken; the caller holds the key's exclusive flock, so
// no semaphore holder or grant is alive, but a min-hold may be.
func (b *Backend) semaphoreOver(key string, n int) error {
	slots, err := b.scanSlots(key, n)
	if err != nil {
		return err
	}
	if anyTaken(slots) {
		return &backend.LimitError{Key: key, Want: 1, Have: n}
	}
	return nil
}

// ReleaseHolder revokes the run of key's holder whose token is token, as
// ForceRelease revokes a plain lock's: its next renewal fails with
// ErrLost, its lockrun hears of it at once (inotify), stops its command and
// lets go of the slot, which then goes to the first waiter. A min-hold of
// that holder ends. It returns an error wrapping ErrLost when no holder of
// key has that token.
func (b *Backend) ReleaseHolder(ctx context.Context, key string, token backend.Token) error {
	return b.revokeToken(ctx, key, token, false)
}

// revokeToken is ReleaseHolder, and with kept Revoke of one holder.
func (b *Backend) revokeToken(ctx context.Context, key string, token backend.Token, kept bool) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	f, err := b.openLock(key, false, false)
	if errors.Is(err, errMissing) {
		return notHolder(key, token)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r, _, err := readState(f)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	if r.Limit > 1 {
		return b.revokeHolders(ctx, key, f, r.Limit, &token, kept)
	}
	if err := lockMutex(ctx, f); err != nil { // see revokeAll
		return err
	}
	defer unlockMutex(f)
	st, err := b.status(key, f)
	switch {
	case err != nil:
		return err
	case !st.Held || st.RunID == "" || st.Token != token:
		return notHolder(key, token)
	}
	beforeRevoking()
	if err := writeRevoked(f, revocation{RunID: st.RunID, Kept: kept}); err != nil {
		return fmt.Errorf("%w: revoking %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	return nil
}

func notHolder(key string, token backend.Token) error {
	return fmt.Errorf("%w: no holder of %q has token %v", backend.ErrLost, key, token)
}

// revokeHolders revokes the run of every live holder of key's semaphore of
// limit n, or of the one with token when it is not nil, in its slot file;
// a holder revoked already by Revoke that still holds its slot counts as
// found. kept marks the revocations as Revoke's (see revocation). It holds
// the semaphore's mutex, so that no grant is half written.
func (b *Backend) revokeHolders(ctx context.Context, key string, kf *os.File, n int, token *backend.Token, kept bool) error {
	if err := lockMutex(ctx, kf); err != nil {
		return err
	}
	defer unlockMutex(kf)
	slots, err := b.peekSlots(key, n) // no probe: a plain acquirer may be looking at the slots too
	if err != nil {
		return err
	}
	found := false
	for _, s := range slots {
		if !s.live && !s.revoked || token != nil && s.rec.Token != *token {
			continue
		}
		found = true
		if s.revoked {
			continue // revoked already, and still stopping
		}
		if err := b.revokeSlot(key, s, kept); err != nil {
			return err
		}
	}
	if token != nil && !found {
		return notHolder(key, *token)
	}
	return nil
}

func (b *Backend) revokeSlot(key string, s slotState, kept bool) error {
	f, err := b.openPath(b.slotPath(key, s.i), false, false)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := writeRevoked(f, revocation{RunID: s.rec.RunID, Kept: kept}); err != nil {
		return fmt.Errorf("%w: revoking %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	return nil
}
