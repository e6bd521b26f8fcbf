package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// Inspect reads the key's record and asks the kernel whether anyone holds
// the flock, without taking it: a test lock could make a concurrent
// acquirer see a busy lock that is in fact free.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Status, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Status{}, err
	}
	f, err := b.openLock(key, true, false)
	if errors.Is(err, errMissing) {
		return backend.Status{Key: key}, nil
	}
	if err != nil {
		return backend.Status{}, err
	}
	defer f.Close()
	return b.status(key, f)
}

// status says who holds the key: the flock's holder as the kernel names it
// (lockrun, whose record then describes it, or another program such as
// flock(1)), else the last holder while its min-hold lasts.
func (b *Backend) status(key string, f *os.File) (backend.Status, error) {
	r, _, err := readState(f)
	if err != nil {
		return backend.Status{Key: key}, fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	pid, held, shared, err := flockHolder(f)
	if err != nil {
		return backend.Status{Key: key}, fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
	}
	switch {
	case shared || !held && r.Limit > 1: // a semaphore's holders and waiters share the flock
		return b.semStatus(key, f, r)
	case held && pid != 0 && pid != r.PID:
		return backend.Status{Key: key, Held: true, Holder: foreign(pid)}, nil
	case held:
		return holdStatus(key, r, 0, f), nil
	}
	if hold := r.held(time.Now()); hold > 0 && readRevoked(f) != r.RunID {
		return holdStatus(key, r, hold, f), nil
	}
	return backend.Status{Key: key, Token: r.Token}, nil
}

// foreign names a flock holder that is not lockrun: its record, if any, is
// an earlier holder's.
func foreign(pid int) string {
	return "a process that is not lockrun: pid " + strconv.Itoa(pid)
}

// holdStatus describes r's holder; ttl is the min-hold left, if any. The
// last renewal is the file's mtime, which Renew sets. A holder whose run
// f's revocation record names is Revoked: it still holds the flock (a
// revoked min-hold keeps nothing), and lets go when its command is dead.
func holdStatus(key string, r record, ttl time.Duration, f *os.File) backend.Status {
	st := backend.Status{Key: key, Held: true, Holder: r.Holder, RunID: r.RunID, Token: r.Token, TTL: ttl}
	st.Revoked = r.RunID != "" && readRevoked(f) == r.RunID
	if r.Since > 0 {
		st.Since = time.UnixMilli(r.Since)
		st.Renewed = st.Since
	}
	if fi, err := f.Stat(); err == nil && fi.ModTime().After(st.Renewed) && !st.Since.IsZero() {
		st.Renewed = fi.ModTime()
	}
	if r.Info != nil {
		st.Info = *r.Info
	}
	return st
}

// ForceRelease revokes the current holder's run: its next renewal reports
// ErrLost, it stops its command and drops the flock; a min-hold ends. The
// token is left as is, so the next holder's is higher. A user who may not
// write the lock file gets ErrPermission; a flock held by a program that is
// not lockrun cannot be broken, and is reported as ErrHeld. On a semaphore
// it revokes every holder (see revokeHolders).
func (b *Backend) ForceRelease(ctx context.Context, key string) error {
	return b.revokeAll(ctx, key, false)
}

// revokeAll is ForceRelease, and with kept Revoke of every holder.
func (b *Backend) revokeAll(ctx context.Context, key string, kept bool) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	f, err := b.openLock(key, false, false)
	if errors.Is(err, errMissing) {
		return nil // never taken: nothing to break
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if r, _, err := readState(f); err == nil && r.Limit > 1 {
		return b.revokeHolders(ctx, key, f, r.Limit, nil, kept)
	}
	// A plain lock's revokers decide under the key's mutex too, one at a
	// time: a revoker that read the holder before it changed must not
	// overwrite, with the older holder's run, the record another revoker
	// wrote for the newer one.
	if err := lockMutex(ctx, f); err != nil {
		return err
	}
	defer unlockMutex(f)
	// Read without the flock, the holder's record can be the previous
	// run's when a grant is being written meanwhile: revoke until the
	// record read after the revocation names the run revoked.
	// A flock whose record names another pid may be a grant being
	// written: look again shortly before calling its holder foreign.
	revoked := ""
	for i := range 100 {
		st, err := b.status(key, f)
		switch {
		case err != nil || !st.Held || st.RunID == revoked && revoked != "":
			return err
		case st.RunID == "" && i < 5:
			time.Sleep(10 * time.Millisecond)
			continue
		case st.RunID == "":
			return fmt.Errorf("%w; release cannot break it: stop that process", &backend.HeldError{Status: st})
		}
		beforeRevoking()
		if err := writeRevoked(f, revocation{RunID: st.RunID, Kept: kept}); err != nil {
			return fmt.Errorf("%w: revoking %s: %w", backend.ErrUnavailable, f.Name(), err)
		}
		revoked = st.RunID
	}
	return fmt.Errorf("%w: revoking %s: its holder keeps changing", backend.ErrUnavailable, f.Name())
}
