package file

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// slotWatch wakes the first waiter of a semaphore when a slot may have
// come free: a slot file's last descriptor closed by a holder that left or
// died (the kernel drops the flock in the same step), or a slot file
// written by a revocation that ends a min-hold. The waiter then looks
// again, under the mutex; a min-hold that ends by itself is waited out on
// a timer. Probes of the slots open them read-only, so they wake no one.
type slotWatch struct {
	ino    *os.File // nil when the kernel cannot watch: then poll
	prefix string   // slot files' names start with it
	closed bool     // the last batch of events had a close in it
	retry  int
}

// pollEvery is how often a waiter looks at the slots when inotify cannot
// tell it.
const pollEvery = 50 * time.Millisecond

func (b *Backend) watchSlots(key string) *slotWatch {
	w := &slotWatch{prefix: filepath.Base(b.path(key)) + slotInfix}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return w
	}
	if _, err := unix.InotifyAddWatch(fd, b.dir, unix.IN_CLOSE_WRITE|unix.IN_MODIFY|unix.IN_ONLYDIR); err != nil {
		unix.Close(fd)
		return w
	}
	w.ino = os.NewFile(uintptr(fd), "inotify")
	return w
}

// wait returns when a slot may be free, hold has passed (0: no limit), or
// ctx ends. The kernel queues close events before it drops the closed
// file's flock: a look right after one may still see the slot taken, so
// after a close the next few looks come on their own, 1, 2, 4, 8 and 16 ms
// later.
func (w *slotWatch) wait(ctx context.Context, hold time.Duration) error {
	if w.closed && w.retry < 5 {
		if d := time.Millisecond << w.retry; hold <= 0 || hold > d {
			hold = d
		}
		w.retry++
	} else {
		w.closed, w.retry = false, 0
	}
	if w.ino == nil {
		return sleep(ctx, pollOr(hold))
	}
	var deadline time.Time
	if hold > 0 {
		deadline = time.Now().Add(hold)
	}
	if err := w.ino.SetReadDeadline(deadline); err != nil {
		return sleep(ctx, pollOr(hold))
	}
	stop := context.AfterFunc(ctx, func() { _ = w.ino.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		n, err := w.ino.Read(buf)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != nil:
			return context.Cause(ctx)
		case err != nil:
			return nil // the hold passed, or the watch broke: look again
		}
		if hit, closed := slotEvents(buf[:n], w.prefix); hit {
			w.closed, w.retry = closed, 0
			return nil
		}
	}
}

func pollOr(hold time.Duration) time.Duration {
	if hold <= 0 || hold > pollEvery {
		return pollEvery
	}
	return hold
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// slotEvents reports whether events concern a slot file (or overflowed),
// and whether one of them was a close.
func slotEvents(buf []byte, prefix string) (hit, closed bool) {
	for len(buf) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(buf) {
			return true, true
		}
		name := strings.TrimRight(string(buf[unix.SizeofInotifyEvent:end]), "\x00")
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 || ev.Len == 0 || strings.HasPrefix(name, prefix) {
			hit = true
			closed = closed || ev.Mask&(unix.IN_CLOSE_WRITE|unix.IN_Q_OVERFLOW) != 0
		}
		buf = buf[end:]
	}
	return hit, closed
}

// close ends the watch without waiting for the kernel to tear it down;
// safe on a nil watch.
func (w *slotWatch) close() {
	if w != nil && w.ino != nil {
		go w.ino.Close()
	}
}
