package runner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/runner/procfs"
	"golang.org/x/sys/unix"
)

// The watchdog is a second process that holds the kill deadline, so that the
// command dies by the deadline even when lockrun itself cannot act: frozen
// (SIGSTOP, a stalled cgroup) or SIGKILLed. lockrun sends it messages over
// a pipe; the watchdog SIGKILLs the command's process group and lockrun's
// other descendants when the deadline passes without a newer one, or at once
// when the pipe closes because lockrun died. lockrun kills the watchdog once
// the command and everything it left behind are gone.
//
// A message is one tag byte and a big-endian int64: 'g' the command's
// process group, 'd' the kill deadline in CLOCK_MONOTONIC nanoseconds.
const msgLen = 9

// watchdogLink is lockrun's end of the pipe. Deadlines are coalesced by a
// writer goroutine, so the heartbeat never blocks on a watchdog that does
// not read, and the newest deadline is always the next one sent.
type watchdogLink struct {
	pid int
	w   *os.File

	mu      sync.Mutex
	pending []byte
	stopped bool
	wake    chan struct{}
}

// startWatchdog starts argv (argv[0] is the path) as the watchdog, in its
// own process group so that signals meant for lockrun's group do not reach
// it, and without a parent-death signal: it must outlive lockrun. It holds
// the lock's files too (see filesLease), so that a lock kept by open files
// is freed only after the watchdog has killed everything, and exited.
//
// The first deadline, killAt, is in the pipe before the watchdog starts:
// a lockrun frozen right after it starts the command, before the writer
// goroutine ran, must still leave an armed watchdog behind.
func startWatchdog(argv []string, lockFiles []*os.File, killAt time.Time) (*watchdogLink, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if _, err := w.Write(message('d', monotonicNS(killAt))); err != nil { // an empty pipe takes it at once
		w.Close()
		return nil, err
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		return nil, err
	}
	defer null.Close()
	proc, err := os.StartProcess(argv[0], argv, &os.ProcAttr{
		Env:   []string{},
		Files: append([]*os.File{r, null, os.Stderr}, lockFiles...),
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("starting the watchdog: %w", err)
	}
	l := &watchdogLink{pid: proc.Pid, w: w, wake: make(chan struct{}, 1)}
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

func (l *watchdogLink) send(tag byte, v int64) {
	msg := message(tag, v)
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	if tag == 'd' && len(l.pending) >= msgLen && l.pending[len(l.pending)-msgLen] == 'd' {
		l.pending = l.pending[:len(l.pending)-msgLen] // a newer deadline replaces an unsent one
	}
	l.pending = append(l.pending, msg...)
	select { // under mu: stop closes wake
	case l.wake <- struct{}{}:
	default:
	}
	l.mu.Unlock()
}

func (l *watchdogLink) writer() {
	defer l.w.Close()
	for range l.wake {
		l.mu.Lock()
		buf := l.pending
		l.pending = nil
		l.mu.Unlock()
		if _, err := l.w.Write(buf); err != nil {
			return
		}
	}
}

// group tells the watchdog which process group to kill.
func (l *watchdogLink) group(pgid int) { l.send('g', int64(pgid)) }

// arm sets the kill deadline.
func (l *watchdogLink) arm(at time.Time) { l.send('d', monotonicNS(at)) }

// stop kills the watchdog: the command has exited, nothing is left to guard.
func (l *watchdogLink) stop() { l.end(true) }

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
	close(l.wake) // the writer closes the pipe
}

// monotonicNS maps a time to CLOCK_MONOTONIC, the clock both processes share.
func monotonicNS(at time.Time) int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano() + int64(time.Until(at))
}

// Watch is the watchdog's side: it reads messages from in until the pipe
// closes or the deadline passes, then kills the command's process group,
// everything in the command's cgroup (the directory cgroupDir, if not
// empty) and every other descendant of lockrun (pid) still alive.
func Watch(in *os.File, lockrun int, cgroupDir string) error {
	// Signals meant for the command or for lockrun must not end the one
	// process that holds the deadline when lockrun cannot.
	signal.Ignore(forwarded...)
	fd := int(in.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		return err
	}
	var pgid int
	var deadline int64 // CLOCK_MONOTONIC ns; 0 until armed
	var pending []byte
	buf := make([]byte, 4096)
	for {
		timeout := time.Duration(-1)
		if deadline != 0 {
			if timeout = time.Duration(deadline - monotonicNS(time.Now())); timeout <= 0 {
				return killTree(pgid, lockrun, cgroupDir, "lockrun did not renew the lease in time")
			}
		}
		if err := waitReadable(fd, timeout); err != nil {
			_ = killTree(pgid, lockrun, cgroupDir, "reading from lockrun failed")
			return err
		}
		n, err := syscall.Read(fd, buf)
		switch {
		case n == 0 && err == nil:
			return killTree(pgid, lockrun, cgroupDir, "lockrun died")
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			_ = killTree(pgid, lockrun, cgroupDir, "reading from lockrun failed")
			return err
		}
		pending = append(pending, buf[:n]...)
		for len(pending) >= msgLen {
			v := int64(binary.BigEndian.Uint64(pending[1:msgLen]))
			switch pending[0] {
			case 'g':
				pgid = int(v)
			case 'd':
				deadline = v
			}
			pending = pending[msgLen:]
		}
	}
}

// waitReadable blocks until fd is readable or timeout passes (forever when
// negative).
func waitReadable(fd int, timeout time.Duration) error {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	var ts *unix.Timespec
	if timeout >= 0 {
		t := unix.NsecToTimespec(int64(timeout))
		ts = &t
	}
	_, err := unix.Ppoll(fds, ts, nil)
	if errors.Is(err, syscall.EINTR) {
		return nil
	}
	return err
}

// waitGroupGone waits, a second at most, until no process of group pgid
// is left: the watchdog's exit may free the lock (it holds the lock's
// files), so it must not exit while the killed are still dying.
func waitGroupGone(pgid int) {
	for i := 0; i < 1000 && procfs.GroupAlive(pgid); i++ {
		time.Sleep(time.Millisecond)
	}
}

// killTree kills the command's process group pgid, its cgroup and every
// other descendant of lockrun. pgid is 0 when lockrun was frozen or killed
// before it could say which group is the command's (the command may run by
// then): the cgroup and the walk of lockrun's descendants still find it.
func killTree(pgid, lockrun int, cgroupDir, why string) error {
	fmt.Fprintf(os.Stderr, "lockrun: watchdog: %s: killing the command\n", why)
	if pgid != 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		defer waitGroupGone(pgid)
	}
	if cgroupDir != "" {
		killCgroup(cgroupDir)
	}
	self := os.Getpid()
	for i := 0; i < 100; i++ {
		found := false
		for _, pid := range procfs.Descendants(lockrun) {
			if pid != self {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				found = true
			}
		}
		if !found {
			break
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}
