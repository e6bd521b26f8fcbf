package runner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The watchdog is a second process that holds the kill deadline, so that the
// command dies by the deadline even when lockrun itself cannot act: frozen
// (SIGSTOP, a stalled cgroup) or SIGKILLed. A waiting lockrun starts it
// before it asks for the lock, so that its start costs the hand-off
// nothing, and talks to it over a socket; the watchdog SIGKILLs the command's process group and
// lockrun's other descendants when the deadline passes without a newer one,
// or at once when the socket closes because lockrun died. lockrun kills the
// watchdog once the command and everything it left behind are gone.
//
// A message is one packet: a tag byte and a big-endian int64. 'g' is the
// command's process group; 'd' the kill deadline in CLOCK_MONOTONIC
// nanoseconds, which may carry the lock's open files (SCM_RIGHTS) for the
// watchdog to hold. A watchdog that was never sent a deadline guards no
// command: when lockrun goes, it goes quietly.
const msgLen = 9

// watchdogLink is lockrun's end of the socket. Deadlines are coalesced by a
// writer goroutine, so the heartbeat never blocks on a watchdog that does
// not read, and the newest deadline is always the next one sent.
type watchdogLink struct {
	pid int
	fd  int // a blocking SOCK_SEQPACKET socket, closed by the writer

	mu      sync.Mutex
	pending [][]byte
	stopped bool
	wake    chan struct{}
}

// startWatchdog starts argv (argv[0] is the path) as the watchdog, in its
// own process group so that signals meant for lockrun's group do not reach
// it, and without a parent-death signal: it must outlive lockrun.
func startWatchdog(argv []string) (*watchdogLink, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("starting the watchdog: %w", err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "watchdog")
	defer theirs.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		_ = unix.Close(fds[0])
		return nil, err
	}
	defer null.Close()
	proc, err := os.StartProcess(argv[0], argv, &os.ProcAttr{
		Env:   []string{},
		Files: []*os.File{theirs, null, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		_ = unix.Close(fds[0])
		return nil, fmt.Errorf("starting the watchdog: %w", err)
	}
	l := &watchdogLink{pid: proc.Pid, fd: fds[0], wake: make(chan struct{}, 1)}
	_ = proc.Release() // reaped by the process reaper
	go l.writer()
	return l, nil
}

func message(tag byte, v int64) []byte {
	msg := make([]byte, msgLen)
	msg[0] = tag
	binary.BigEndian.PutUint64(msg[1:], uint64(v))
	return msg
}

// guard gives the watchdog its first deadline and the lock's files to hold
// (see filesLease), so that a lock kept by open files is freed only after
// the watchdog has killed everything, and exited. It writes at once rather
// than through the writer goroutine: the command starts next, and a lockrun
// frozen right after must leave an armed watchdog behind.
func (l *watchdogLink) guard(at time.Time, files []*os.File) error {
	var rights []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		rights = unix.UnixRights(fds...)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return errors.New("the watchdog has exited")
	}
	// Nothing was sent before, so the socket's buffer takes this at once.
	if err := unix.Sendmsg(l.fd, message('d', monotonicNS(at)), rights, nil, unix.MSG_NOSIGNAL); err != nil {
		return fmt.Errorf("arming the watchdog: %w", err)
	}
	return nil
}

func (l *watchdogLink) send(tag byte, v int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if n := len(l.pending); tag == 'd' && n > 0 && l.pending[n-1][0] == 'd' {
		l.pending = l.pending[:n-1] // a newer deadline replaces an unsent one
	}
	l.pending = append(l.pending, message(tag, v))
	select { // under mu: end closes wake
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *watchdogLink) writer() {
	defer unix.Close(l.fd)
	for range l.wake {
		l.mu.Lock()
		msgs := l.pending
		l.pending = nil
		l.mu.Unlock()
		for _, msg := range msgs {
			if err := unix.Send(l.fd, msg, unix.MSG_NOSIGNAL); err != nil {
				return
			}
		}
	}
}

// group tells the watchdog which process group to kill.
func (l *watchdogLink) group(pgid int) { l.send('g', int64(pgid)) }

// arm moves the kill deadline.
func (l *watchdogLink) arm(at time.Time) { l.send('d', monotonicNS(at)) }

// stop kills the watchdog: the command has exited, nothing is left to guard.
func (l *watchdogLink) stop() { l.end(true) }

// dismiss lets a watchdog that guards no command go: it exits quietly when
// its socket closes.
func (l *watchdogLink) dismiss() { l.end(false) }

// reaped notes that the watchdog exited on its own: its pid may be reused,
// so it must never be signalled again.
func (l *watchdogLink) reaped() { l.end(false) }

func (l *watchdogLink) end(kill bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	l.stopped = true
	if kill {
		_ = syscall.Kill(l.pid, syscall.SIGKILL)
	}
	close(l.wake) // the writer closes the socket
}

// monotonicNS maps a time to CLOCK_MONOTONIC, the clock both processes share.
func monotonicNS(at time.Time) int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano() + int64(time.Until(at))
}
