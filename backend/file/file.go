// Package file is lockrun's embedded backend: one lock file per key in a
// local directory, locked with flock(2). The kernel drops the lock when its
// holder dies, so the lease lasts exactly as long as the holding process;
// the TTL only bounds how long a revoked holder may take to notice. The
// fencing token is a counter kept in the lock file, fsynced under the lock.
package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// Backend keeps locks in one directory. Every process that should exclude
// the others must use the same directory.
type Backend struct {
	dir string
}

// Open uses dir for lock files, creating it (mode 0755) when missing.
func Open(dir string) (*Backend, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("%w: lock directory %q must be an absolute path", backend.ErrInvalidURL, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: lock directory: %w", backend.ErrUnavailable, err)
	}
	return &Backend{dir: dir}, nil
}

// Dir is the directory that holds the lock files.
func (b *Backend) Dir() string { return b.dir }

// Close does nothing: the backend holds no resource of its own.
func (b *Backend) Close() error { return nil }

func (b *Backend) path(key string) string { return filepath.Join(b.dir, key+".lock") }

// open opens the key's lock file, creating it when missing.
func (b *Backend) open(key string) (*os.File, error) {
	if err := backend.ValidateKey(key); err != nil {
		return nil, err
	}
	return openLock(b.path(key), false, true)
}

// Acquire takes the flock on the key's file, then issues the next token.
func (b *Backend) Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	f, err := b.open(key)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) && o.Wait {
		start, err = flockWait(ctx, f)
	}
	if err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			st, _ := b.status(key, f)
			return nil, &backend.HeldError{Status: st}
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for %s: %w", f.Name(), err)
		}
		return nil, fmt.Errorf("%w: locking %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	l, err := b.grant(key, f, o, start)
	if err != nil {
		f.Close() // drops the flock
		return nil, err
	}
	return l, nil
}

// grant writes the new holder and token while the flock is held. The token
// is the last one plus one, and never less than the wall clock in
// microseconds, so that it still grows when the file is lost, e.g. with a
// lock directory on tmpfs across a reboot.
func (b *Backend) grant(key string, f *os.File, o backend.AcquireOptions, start time.Time) (*lease, error) {
	last, slot, err := readState(f)
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	now := time.Now()
	r := record{
		Token:  max(last.Token+1, backend.Token(now.UnixMicro())),
		Holder: o.Holder,
		RunID:  o.RunID,
		PID:    os.Getpid(),
		Since:  now.UnixMilli(),
	}
	if err := writeState(f, r, slot); err != nil {
		return nil, fmt.Errorf("%w: writing %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	return &lease{f: f, path: f.Name(), rec: r, ttl: o.TTL, start: start}, nil
}

// flockWait blocks in flock(2) until the lock is free or ctx ends. The
// kernel wakes a blocked flock the moment the holder closes its file or
// dies, so nothing polls. A blocked flock cannot be interrupted: when ctx
// ends first, the call is left behind on a duplicate of f, and drops the
// lock at once if it ever gets it.
func flockWait(ctx context.Context, f *os.File) (time.Time, error) {
	dup, err := syscall.Dup(int(f.Fd()))
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
