package clock

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Boot reads CLOCK_BOOTTIME, not the monotonic clock: the two differ by
// the time spent suspended, so the reading must lie between two of the
// kernel's own CLOCK_BOOTTIME readings.
func TestBootIsCLOCK_BOOTTIME(t *testing.T) {
	var a, b unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &a)
	now := Boot.Now().UnixNano()
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &b)
	if now < a.Nano() || now > b.Nano() {
		t.Errorf("Boot.Now() = %d, not within CLOCK_BOOTTIME readings [%d, %d]", now, a.Nano(), b.Nano())
	}
}

func TestBootAtWakesOnTimeAndStops(t *testing.T) {
	begin := Boot.Now()
	c, stop := Boot.At(begin.Add(30 * time.Millisecond))
	defer stop()
	select {
	case <-c:
		if got := Boot.Now().Sub(begin); got < 30*time.Millisecond {
			t.Errorf("woke after %v, before the 30ms asked for", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Boot.At never woke")
	}
	c, stop = Boot.At(Boot.Now().Add(time.Hour))
	stop()
	stop() // twice is fine
	select {
	case <-c:
		t.Error("a stopped wait woke")
	case <-time.After(20 * time.Millisecond):
	}
	if c, _ := Boot.At(begin); !closed(c) {
		t.Error("a wait for a past time did not wake at once")
	}
}

func TestTimerfdReadableOncePast(t *testing.T) {
	tf, err := NewTimerfd()
	if err != nil {
		t.Fatal(err)
	}
	defer tf.Close()
	if err := tf.Set(BootNS() + int64(20*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	fds := []unix.PollFd{{Fd: int32(tf.Fd()), Events: unix.POLLIN}}
	ts := unix.NsecToTimespec(int64(5 * time.Second))
	begin := BootNS()
	if n, err := unix.Ppoll(fds, &ts, nil); n != 1 || err != nil {
		t.Fatalf("ppoll = %d, %v; want the timer readable", n, err)
	}
	if waited := time.Duration(BootNS() - begin); waited < 15*time.Millisecond {
		t.Errorf("readable after %v, before its time", waited)
	}
}

func TestFakeWakesDueWaitersOnAdvance(t *testing.T) {
	f := NewFake(time.Unix(100, 0))
	soon, _ := f.At(f.Now().Add(time.Second))
	later, _ := f.At(f.Now().Add(time.Hour))
	f.Advance(2 * time.Second)
	if !closed(soon) || closed(later) {
		t.Errorf("after 2s: soon woke %v (want true), later woke %v (want false)", closed(soon), closed(later))
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
