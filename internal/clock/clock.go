// Package clock keeps lockrun's deadlines on CLOCK_BOOTTIME, the clock that
// keeps counting while the machine is suspended, as the servers' lease
// clocks do. Go's own clock (time.Now's monotonic reading, timers) is
// CLOCK_MONOTONIC, which stops during a suspend: after one longer than the
// TTL, a deadline on it would still lie ahead while the lease has expired.
//
// Times from a Clock are on that clock's own scale (for Boot: the time
// since boot, as if from 1970): compare and subtract them only with times
// from the same Clock.
package clock

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Clock tells the time and wakes its callers at a time.
type Clock interface {
	// Now is the current time on this clock.
	Now() time.Time
	// At returns a channel that is closed once the clock reaches t, even
	// when the machine was suspended in between, and a stop function that
	// frees what it holds (safe to call more than once, and after it fired).
	At(t time.Time) (<-chan struct{}, func())
}

// Boot is CLOCK_BOOTTIME: lockrun's clock for every deadline.
var Boot Clock = boot{}

// BootNS is CLOCK_BOOTTIME in nanoseconds: what the watchdog's deadlines
// are written in.
func BootNS() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts) // cannot fail for this clock on Linux ≥ 2.6.39
	return ts.Nano()
}

type boot struct{}

func (boot) Now() time.Time { return time.Unix(0, BootNS()) }

// At wakes on a CLOCK_BOOTTIME timerfd in Go's poller, so no thread is held
// and a suspend that passes t wakes it at resume. If no timerfd can be made
// (out of descriptors), it polls the clock every pollEvery instead.
func (boot) At(t time.Time) (<-chan struct{}, func()) {
	c := make(chan struct{})
	if BootNS() >= t.UnixNano() {
		close(c)
		return c, func() {}
	}
	if stop, err := timerfdAt(t.UnixNano(), c); err == nil {
		return c, stop
	}
	return c, pollAt(t.UnixNano(), c)
}

// pollEvery bounds how late a polled wake-up can be after a suspend.
const pollEvery = 50 * time.Millisecond

func pollAt(ns int64, c chan struct{}) func() {
	done := make(chan struct{})
	go func() {
		for {
			left := time.Duration(ns - BootNS())
			if left <= 0 {
				close(c)
				return
			}
			t := time.NewTimer(min(left, pollEvery))
			select {
			case <-t.C:
			case <-done:
				t.Stop()
				return
			}
		}
	}()
	return sync.OnceFunc(func() { close(done) })
}
