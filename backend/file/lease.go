package file

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// lease is a held flock. It stays valid while the file stays open, the
// path still names the locked file, and no one revoked this run.
type lease struct {
	path  string
	rec   record
	ttl   time.Duration
	start time.Time

	mu sync.Mutex
	f  *os.File // nil once released or abandoned
}

func (l *lease) Token() backend.Token { return l.rec.Token }
func (l *lease) TTL() time.Duration   { return l.ttl }
func (l *lease) Start() time.Time     { return l.start }

// Renew checks that the lock is still ours; the flock itself never expires.
func (l *lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.check()
}

// check reports ErrLost when the file was closed, replaced or deleted, or
// when ForceRelease revoked this run. Callers hold l.mu.
func (l *lease) check() error {
	if l.f == nil {
		return fmt.Errorf("%w: %s was released", backend.ErrLost, l.path)
	}
	switch ok, err := named(l.f, l.path); {
	case err != nil:
		return fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, l.path, err)
	case !ok:
		return fmt.Errorf("%w: %s was deleted or replaced while locked", backend.ErrLost, l.path)
	}
	if readRevoked(l.f) == l.rec.RunID {
		return fmt.Errorf("%w: %s: run %s was force-released", backend.ErrLost, l.path, l.rec.RunID)
	}
	return nil
}

// Files is the locked file: a command that inherits it keeps the flock
// held until it dies, even if lockrun dies first (the kernel frees a flock
// when the last descriptor of its open file is closed).
func (l *lease) Files() []*os.File {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	return []*os.File{l.f}
}

// Release drops the flock. A revoked lease is still unlocked (the flock is
// ours until we let go of it), and reports ErrLost.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.check()
	if l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
		l.f = nil
	}
	return err
}
