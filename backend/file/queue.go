package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/backend"
)

// A semaphore's grants and its queue of waiters are kept with open file
// description locks (F_OFD_SETLK) on the key's lock file: byte ranges,
// which on Linux are independent of the file's flock, owned by the open
// file as a flock is, and dropped by the kernel when the last descriptor of
// it closes (a crashed lockrun's included). Byte 0 is the mutex under
// which every grant, and every revocation (of a slot or a plain lock), decides; a waiter
// holds one byte beyond it, its ticket, for as long as it waits, so that
// the kernel keeps the queue's order and drops a dead waiter from it.

// plainWaiterByte is the byte of a key's lock file that a plain lock's
// waiter holds (a shared OFD lock) while it waits in flock(2); tickets
// are the bytes below it (the clock in microseconds will not reach 2^62
// for 140,000 years). See markPlainWaiter.
const plainWaiterByte = 1 << 62

// ofd sets (or with wait, waits for) an OFD lock of type typ on
// [start, start+n) of fd; n 0 runs to the end of every file.
func ofd(fd int, typ int16, start, n int64, wait bool) error {
	lk := unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: start, Len: n}
	cmd := unix.F_OFD_SETLK
	if wait {
		cmd = unix.F_OFD_SETLKW
	}
	for {
		err := unix.FcntlFlock(uintptr(fd), cmd, &lk)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// ofdFirst returns the first lock that another open file holds on
// [start, start+n) of fd's file, and false when there is none.
func ofdFirst(fd int, start, n int64) (unix.Flock_t, bool, error) {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: start, Len: n}
	err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, &lk)
	return lk, err == nil && lk.Type != unix.F_UNLCK, err
}

// lockMutex waits for key's semaphore mutex on its open lock file kf, or
// for ctx to end. It is held for a scan of the slots and a grant (a few
// reads, one fsync), and a dead holder's is dropped by the kernel, so the
// wait is short unless its holder is frozen.
func lockMutex(ctx context.Context, kf *os.File) error {
	err := ofd(int(kf.Fd()), unix.F_WRLCK, 0, 1, false)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		err = ofdWait(ctx, kf, 0, 1)
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%w: locking %s: %w", backend.ErrUnavailable, kf.Name(), err)
	}
	return err
}

func unlockMutex(kf *os.File) { _ = ofd(int(kf.Fd()), unix.F_UNLCK, 0, 1, false) }

// waiting reports whether anyone waits in key's queue.
func waiting(kf *os.File) (bool, error) {
	_, found, err := ofdFirst(int(kf.Fd()), 1, plainWaiterByte-1)
	if err != nil {
		return false, fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, kf.Name(), err)
	}
	return found, nil
}

// ticket is a waiter's place in a semaphore's queue: a lock on byte at of
// the key's lock file, through an open file of its own (q), so that leaving
// the queue touches nothing else.
type ticket struct {
	q  *os.File
	at int64
}

// takeTicket puts the caller at the end of key's queue; the mutex is held.
// Tickets are the clock in microseconds, above every ticket still held.
func (b *Backend) takeTicket(kf *os.File) (*ticket, error) {
	q, err := b.openPath(kf.Name(), false, false)
	if err != nil {
		return nil, err
	}
	at := 1 + time.Now().UnixMicro()
	for {
		lk, found, err := ofdFirst(int(q.Fd()), at, plainWaiterByte-at)
		if err == nil && !found {
			err = ofd(int(q.Fd()), unix.F_WRLCK, at, 1, false)
		}
		if err != nil {
			q.Close()
			return nil, fmt.Errorf("%w: queueing on %s: %w", backend.ErrUnavailable, kf.Name(), err)
		}
		if !found {
			return &ticket{q: q, at: at}, nil
		}
		at = max(at+1, lk.Start+lk.Len)
	}
}

// waitTurn blocks until every waiter ahead has left the queue (got a slot,
// gave up or died), or ctx ends. The kernel wakes it: it asks for the whole
// range of tickets below its own, and its own.
func (t *ticket) waitTurn(ctx context.Context) error {
	err := ofdWait(ctx, t.q, 1, t.at)
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%w: waiting in the queue of %s: %w", backend.ErrUnavailable, t.q.Name(), err)
	}
	return err
}

// ofdWait waits for a write lock on [start, start+n) of f, or for ctx to
// end. A blocked fcntl cannot be interrupted: a request that ctx abandons
// is left behind on a duplicate descriptor (the same open file, so the
// caller's unlocks cover it) and lets go at once if it is ever granted.
func ofdWait(ctx context.Context, f *os.File, start, n int64) error {
	dup, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0) // not inherited by a process started meanwhile
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	abandoned := make(chan struct{})
	go func() {
		err := ofd(dup, unix.F_WRLCK, start, n, true)
		select {
		case <-abandoned:
			if err == nil {
				_ = ofd(dup, unix.F_UNLCK, start, n, false)
			}
		default:
			done <- err
		}
		syscall.Close(dup)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		close(abandoned)
		return context.Cause(ctx)
	}
}

// leave gives the place up; safe on a nil ticket.
func (t *ticket) leave() {
	if t == nil {
		return
	}
	_ = ofd(int(t.q.Fd()), unix.F_UNLCK, 1, plainWaiterByte-1, false)
	t.q.Close()
}

// markPlainWaiter says, on a plain acquirer's open lock file f, that it is
// about to wait in flock(2); unmarkPlainWaiter takes that back once it got
// the flock or gave up. The mark comes before the waiter's look for a
// semaphore (semaphoreHeld), and a semaphore acquirer looks for marks after
// it took its shared flock (shareKey): whichever comes second sees the
// other, so a plain waiter never ends up queued behind a semaphore.
func markPlainWaiter(f *os.File) error {
	return ofd(int(f.Fd()), unix.F_RDLCK, plainWaiterByte, 1, false)
}

func unmarkPlainWaiter(f *os.File) { _ = ofd(int(f.Fd()), unix.F_UNLCK, plainWaiterByte, 1, false) }

// plainWaits reports whether a plain acquirer has marked kf's file.
func plainWaits(kf *os.File) (bool, error) {
	_, found, err := ofdFirst(int(kf.Fd()), plainWaiterByte, 1)
	return found, err
}
