package clock

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// timerfdAt closes c when CLOCK_BOOTTIME reaches ns, from a timerfd that
// Go's poller watches; the returned stop closes it.
func timerfdAt(ns int64, c chan struct{}) (func(), error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(ns)}
	if err := unix.TimerfdSettime(fd, unix.TFD_TIMER_ABSTIME, &spec, nil); err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "timerfd") // non-blocking: Go's poller waits for it
	var once sync.Once
	stop := func() { once.Do(func() { _ = f.Close() }) }
	go func() {
		var buf [8]byte
		if _, err := f.Read(buf[:]); err == nil {
			close(c)
		}
		stop()
	}()
	return stop, nil
}

// Timerfd is a CLOCK_BOOTTIME timer as a plain descriptor, for a caller
// that polls it itself (the watchdog): readable once the deadline passed.
type Timerfd struct{ fd int }

// NewTimerfd makes a disarmed timer.
func NewTimerfd() (*Timerfd, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_BOOTTIME, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &Timerfd{fd: fd}, nil
}

// Fd is the descriptor to poll for POLLIN.
func (t *Timerfd) Fd() int { return t.fd }

// Set arms the timer for CLOCK_BOOTTIME ns, replacing any earlier time and
// an expiry not yet read; a time already past makes it readable at once.
func (t *Timerfd) Set(ns int64) error {
	var buf [8]byte
	_, _ = unix.Read(t.fd, buf[:]) // drop an earlier expiry (EAGAIN when none)
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(ns)}
	return unix.TimerfdSettime(t.fd, unix.TFD_TIMER_ABSTIME, &spec, nil)
}

// Close frees the descriptor.
func (t *Timerfd) Close() error { return unix.Close(t.fd) }
