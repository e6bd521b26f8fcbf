package file

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/backend"
)

// lease is a held flock. It stays valid while the file stays open, the
// path still names the locked file, and no one revoked this run. A
// semaphore holder's flock is on its slot file (path, f), beside the
// shared flock on the key's lock file (keyPath, key) that keeps plain
// locks out; both paths must still name the files locked.
type lease struct {
	path    string
	keyPath string // a semaphore's: the key's lock file; "" for a plain lock
	rec     record
	ttl     time.Duration
	start   time.Time

	mu         sync.Mutex
	f          *os.File    // nil once released or abandoned
	key        *os.File    // a semaphore's: the key's lock file, flocked shared
	watch      *watcher    // made by Done; nil before
	watchTimer *time.Timer // starts the watch after watchDelay

	handedOn *atomic.Bool // the backend's: set by a release that leaves someone waiting
}

func (l *lease) Token() backend.Token { return l.rec.Token }
func (l *lease) TTL() time.Duration   { return l.ttl }
func (l *lease) Start() time.Time     { return l.start }

// Renew checks that the lock is still ours; the flock itself never
// expires. It stamps the file's mtime, which Inspect reports as the last
// renewal (and which keeps tmp cleaners that go by age away from it).
func (l *lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.check(); err != nil {
		return err
	}
	now := unix.NsecToTimeval(time.Now().UnixNano())
	_ = unix.Futimes(int(l.f.Fd()), []unix.Timeval{now, now}) // only for operators to read
	return nil
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
	if l.key == nil {
		return nil
	}
	switch ok, err := named(l.key, l.keyPath); {
	case err != nil:
		return fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, l.keyPath, err)
	case !ok:
		return fmt.Errorf("%w: %s was deleted or replaced while its semaphore was held", backend.ErrLost, l.keyPath)
	}
	return nil
}

// Done is closed as soon as the lease is lost to a change of its file:
// removed, renamed, replaced, or revoked by ForceRelease. The kernel tells
// (inotify), so the holder need not wait for its next renewal to stop its
// command. The watch begins watchDelay after the first call (a change
// before that is seen then). When the kernel cannot watch (no inotify
// instance left), Done is never closed and renewals find the loss.
func (l *lease) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watch == nil {
		w := newWatcher()
		l.watch = w
		l.watchTimer = time.AfterFunc(watchDelay, func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.f != nil {
				w.start(l)
			}
		})
	}
	return l.watch.lost
}

// Files is the locked file: a command that inherits it keeps the flock
// held until it dies, even if lockrun dies first (the kernel frees a flock
// when the last descriptor of its open file is closed).
func (l *lease) Files() []*os.File {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.f == nil:
		return nil
	case l.key != nil:
		return []*os.File{l.f, l.key}
	}
	return []*os.File{l.f}
}

// Release drops the flock. A revoked lease is still unlocked (the flock is
// ours until we let go of it), and reports ErrLost. A min-hold recorded at
// the grant keeps the key taken until it ends.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unlock(l.check())
}

// GiveBack drops the flock with no min-hold after it: the run revokes its
// own record first (as ForceRelease does), under the flock and only while
// the lease is still ours, so that the hold recorded at the grant no
// longer keeps the key taken.
func (l *lease) GiveBack(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.check()
	if err == nil && l.rec.HoldUntil > 0 {
		if werr := writeRevoked(l.f, revocation{RunID: l.rec.RunID}); werr != nil {
			err = fmt.Errorf("%w: giving back %s: %w", backend.ErrUnavailable, l.path, werr)
		}
	}
	return l.unlock(err)
}

// unlock drops the flock and stops the watch, and returns err. Callers
// hold l.mu.
func (l *lease) unlock(err error) error {
	if l.f != nil && l.handedOn != nil && l.someoneWaits() {
		l.handedOn.Store(true)
	}
	if l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		if l.key != nil {
			ring(l.f)
		}
		_ = l.f.Close()
		l.f = nil
	}
	if l.key != nil { // after the slot: no plain acquirer sees a slot still taken
		_ = syscall.Flock(int(l.key.Fd()), syscall.LOCK_UN)
		_ = l.key.Close()
		l.key = nil
	}
	if l.watchTimer != nil {
		l.watchTimer.Stop()
	}
	l.watch.stop() // after the unlock: a waiter need not wait for it
	return err
}

// someoneWaits reports whether another acquirer waits for the key: a
// plain lock's waiter marks the lock file (see markPlainWaiter), a
// semaphore's holds a ticket on the key's lock file. Callers hold l.mu.
func (l *lease) someoneWaits() bool {
	if l.key == nil {
		waits, _ := plainWaits(l.f)
		return waits
	}
	_, waits, _ := ofdFirst(int(l.key.Fd()), 1, plainWaiterByte-1)
	return waits
}

// ring tells a semaphore's first waiter that f's slot is free: it opens
// the same file for writing, through /proc/self/fd (never the path, which
// may name another file by now), and closes it, which inotify reports as a
// close of the slot file. The waiter cannot count on the lease's own
// close: the watchdog (and a command's leftovers) may keep the file open
// after the flock is dropped. Without /proc, the file's last close wakes it.
func ring(f *os.File) {
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err == nil {
		_ = unix.Close(fd)
	}
}
