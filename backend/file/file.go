// Package file is lockrun's embedded backend: one lock file per key in a
// local directory, locked with flock(2). The kernel drops the lock when its
// holder dies, so the lease lasts exactly as long as the holding process; a
// holder hears at once (inotify, see Done) when it is revoked or its file
// removed, and the TTL only bounds how long that takes when the kernel
// cannot watch. The fencing token is a counter kept in the lock file,
// synced to disk under the lock. Who may take, release or revoke a lock
// is who may write its file; directories are verified before use (see
// Open).
package file

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/backend"
)

// Backend keeps locks in one directory. Every process that should exclude
// the others must use the same directory.
type Backend struct {
	dir      string
	fileMode uint32 // of new lock files: 0660 in a directory shared with a group, else 0600
	open     bool   // anyone may create files in dir (world-writable, sticky)

	handedOn atomic.Bool // a release left someone waiting: see Close
}

// Open uses dir for lock files, creating it (0700, and 0755 for missing
// directories above it) when missing. Before use it is verified as a
// systemd runtime directory would be: no one but root and this user can
// rename, replace or redirect it or anything above it, and when others may
// write to it, it is a directory shared on purpose: setgid when a group may
// write (its lock files then belong to the group), sticky when all may.
// Otherwise the error wraps backend.ErrPermission.
func Open(dir string) (*Backend, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%w: lock directory %q must be an absolute path", backend.ErrInvalidURL, dir)
	}
	d, err := verifyDir(dir, true)
	if err != nil {
		return nil, err
	}
	if err := sharedOK(d); err != nil {
		return nil, err
	}
	return newBackend(d), nil
}

func newBackend(d dirInfo) *Backend {
	b := &Backend{dir: d.path, fileMode: 0o600, open: d.st.Mode&syscall.S_IWOTH != 0}
	if d.st.Mode&syscall.S_IWGRP != 0 && d.st.Mode&syscall.S_ISGID != 0 {
		b.fileMode = 0o660 // the directory's group shares its locks
	}
	return b
}

// Dir is the directory that holds the lock files: the real path, with any
// symbolic link on the way resolved.
func (b *Backend) Dir() string { return b.dir }

// Close holds no resource to free. After a release that left someone
// waiting it waits closeDelay, so that the caller's exit, work for the
// machine, does not come just as the next in line takes the lock and
// starts its command.
func (b *Backend) Close() error {
	if b.handedOn.Load() {
		time.Sleep(closeDelay)
	}
	return nil
}

// closeDelay is how long Close waits after a release that left someone
// waiting: about a hand-off on a quiet host.
const closeDelay = 3 * time.Millisecond

// Local reports that the locks live on this machine: an Acquire answers
// without a round trip, a busy lock at once.
func (b *Backend) Local() bool { return true }

func (b *Backend) path(key string) string { return filepath.Join(b.dir, key+".lock") }

// Acquire takes the flock on the key's file, then issues the next token.
// A key still within its last holder's min-hold is held, flock or not.
func (b *Backend) Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	if err := backend.ValidateRequest(key, o); err != nil {
		return nil, err
	}
	if o.EffectiveLimit() > 1 {
		return b.acquireSem(ctx, key, o)
	}
	for {
		f, start, err := b.lock(ctx, key, o.Wait)
		if err != nil {
			return nil, err
		}
		// A file unlinked or replaced while we opened or waited for it (an
		// admin's rm, a tmp cleaner) excludes nobody who opens the path
		// afresh: lock the file the path names now.
		if ok, err := named(f, f.Name()); !ok {
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, f.Name(), err)
			}
			continue
		}
		l, hold, err := b.grant(key, f, o, start)
		if l != nil || err != nil {
			return l, err
		}
		if err := waitHold(ctx, hold); err != nil {
			return nil, err
		}
	}
}

// waitHold sleeps through a min-hold that keeps the key taken, a second at
// a time, so that a release of the key is seen within a second.
func waitHold(ctx context.Context, hold time.Duration) error {
	t := time.NewTimer(min(hold, time.Second))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// lock opens the key's lock file, creating it when missing, and flocks it,
// waiting if wait says so. start is the local time just before the flock
// that succeeded.
func (b *Backend) lock(ctx context.Context, key string, wait bool) (f *os.File, start time.Time, err error) {
	f, err = b.openLock(key, false, true)
	if err != nil {
		return nil, start, err
	}
	start = time.Now()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) && wait {
		if lerr := plainWaitable(key, f); lerr != nil {
			f.Close()
			return nil, start, lerr // waiting would wait out the whole semaphore
		}
		start, err = flockWait(ctx, f)
		unmarkPlainWaiter(f) // the lease's file goes to the command: no mark on it
	}
	if err == nil {
		return f, start, nil
	}
	defer f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		if lerr := semaphoreHeld(key, f); lerr != nil {
			return nil, start, lerr
		}
		st, _ := b.status(key, f)
		return nil, start, &backend.HeldError{Status: st}
	}
	if ctx.Err() != nil {
		return nil, start, fmt.Errorf("waiting for %s: %w", f.Name(), err)
	}
	return nil, start, fmt.Errorf("%w: locking %s: %w", backend.ErrUnavailable, f.Name(), err)
}

// named reports whether path still names the open file f.
func named(f *os.File, path string) (bool, error) {
	var held, now syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &held); err != nil {
		return false, err
	}
	err := syscall.Lstat(path, &now)
	if errors.Is(err, syscall.ENOENT) {
		return false, nil
	}
	return err == nil && now.Ino == held.Ino && now.Dev == held.Dev, err
}

// grant writes the new holder and token while the flock is held. The token
// is the last one plus one, and never less than the wall clock in
// microseconds, so that it still grows when the file is lost, e.g. with a
// lock directory on tmpfs across a reboot; a counter at its limit is an
// error, never a wrap. When the last holder's min-hold still keeps the key
// taken, the flock is dropped again: with o.Wait grant returns how long to
// wait, without it a HeldError.
func (b *Backend) grant(key string, f *os.File, o backend.AcquireOptions, start time.Time) (*lease, time.Duration, error) {
	l, hold, err := b.write(key, f, o, start)
	if l == nil {
		f.Close() // drops the flock
	}
	return l, hold, err
}

func (b *Backend) write(key string, f *os.File, o backend.AcquireOptions, start time.Time) (*lease, time.Duration, error) {
	last, slot, err := readState(f)
	if errors.Is(err, errForeign) {
		return nil, 0, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("%w: reading %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	if last.Limit > 1 {
		// The last grant was a semaphore's: its holders are gone (none
		// keeps the shared flock), but a min-hold may keep a slot.
		if err := b.semaphoreOver(key, last.Limit); err != nil {
			return nil, 0, err
		}
	}
	now := time.Now()
	if hold := last.held(now); hold > 0 && last.RunID != o.RunID && readRevoked(f) != last.RunID {
		if o.Wait {
			return nil, hold, nil
		}
		return nil, 0, &backend.HeldError{Status: holdStatus(key, last, hold, f)}
	}
	if last.Token == math.MaxUint64 {
		return nil, 0, fmt.Errorf("%w: %s: the token counter is at its limit (%d): no higher token can be issued", backend.ErrUnavailable, f.Name(), last.Token)
	}
	if o.Granting != nil {
		o.Granting()
	}
	r := newRecord(max(last.Token+1, backend.Token(now.UnixMicro())), o, now)
	if err := writeState(f, r, slot); err != nil {
		return nil, 0, fmt.Errorf("%w: writing %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	return &lease{f: f, path: f.Name(), rec: r, ttl: o.TTL, start: start, handedOn: &b.handedOn}, 0, nil
}

func newRecord(token backend.Token, o backend.AcquireOptions, now time.Time) record {
	r := record{Token: token, Holder: o.Holder, RunID: o.RunID, PID: os.Getpid(), Since: now.UnixMilli()}
	if o.MinHold > 0 {
		// Both rounded up to the record's milliseconds: the hold must
		// not end before the grant plus MinHold, even by a fraction.
		r.MinHold = max(1, (o.MinHold + time.Millisecond - 1).Milliseconds())
		r.HoldUntil = (now.UnixMicro()+999)/1000 + r.MinHold
	}
	if o.Info != (backend.HolderInfo{}) {
		info := o.Info
		r.Info = &info
	}
	return r
}

// flockWait blocks in flock(2) until the lock is free or ctx ends. The
// kernel wakes a blocked flock the moment the holder closes its file or
// dies, so nothing polls. A blocked flock cannot be interrupted: when ctx
// ends first, the call is left behind on a duplicate of f, and drops the
// lock at once if it ever gets it.
func flockWait(ctx context.Context, f *os.File) (time.Time, error) {
	dup, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0) // not inherited by a process started meanwhile
	if err != nil {
		return time.Time{}, err
	}
	// A dup shares f's open file description, hence its flock: taking the
	// lock through dup takes it for f.
	done := make(chan error, 1)
	abandoned := make(chan struct{})
	go func() {
		err := syscall.Flock(dup, syscall.LOCK_EX)
		select {
		case <-abandoned:
			if err == nil {
				_ = syscall.Flock(dup, syscall.LOCK_UN)
			}
			syscall.Close(dup)
		default:
			syscall.Close(dup)
			done <- err
		}
	}()
	select {
	case err := <-done:
		return time.Now(), err
	case <-ctx.Done():
		close(abandoned)
		select {
		case err := <-done: // got it just now
			if err == nil {
				return time.Now(), nil
			}
		default:
		}
		return time.Time{}, context.Cause(ctx)
	}
}
