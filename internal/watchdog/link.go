package watchdog

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/procfs"
	"golang.org/x/sys/unix"
)

// ErrExited is the error of a message to a watchdog that has exited.
var ErrExited = errors.New("the watchdog has exited")

// Link is lockrun's end of the socket. Arm's deadlines are coalesced by a
// writer goroutine, so the heartbeat never blocks on a watchdog that does
// not read, and the newest deadline is always the next one sent.
type Link struct {
	pid int
	fd  int // a blocking SOCK_SEQPACKET socket, closed by the writer

	mu      sync.Mutex
	pending [][]byte
	stopped bool
	wake    chan struct{}
}

// Start starts p as the watchdog of this process, for the command's
// cgroup cgroupDir (none if empty), in its own process group so that
// signals meant for lockrun's group do not reach it, and without a
// parent-death signal: it must outlive lockrun. The caller reaps it.
func Start(p Program, cgroupDir string) (*Link, error) {
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
	pid, err := procfs.Start(p.Path, p.argv(os.Getpid(), cgroupDir), &os.ProcAttr{
		Env:   []string{envRunID + "=" + p.RunID, envProtocol + "=" + protocol},
		Files: []*os.File{theirs, null, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		_ = unix.Close(fds[0])
		return nil, fmt.Errorf("starting the watchdog: %w", err)
	}
	l := &Link{pid: pid, fd: fds[0], wake: make(chan struct{}, 1)} // reaped by the caller's reaper
	go l.writer()
	return l, nil
}

// Pid is the watchdog's process id.
func (l *Link) Pid() int { return l.pid }

// Guard gives the watchdog its first deadline, the latest time at which the
// command may start (the term deadline), and the lock's files to hold, so
// that a lock kept by open files is freed only after the watchdog has
// killed everything, and exited. It writes at once rather than through the
// writer goroutine: the command starts next, and a lockrun frozen right
// after must leave an armed watchdog behind.
func (l *Link) Guard(startBy time.Time, files []*os.File) error {
	var rights []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		rights = unix.UnixRights(fds...)
	}
	return l.sendNow(message(tagDeadline, startBy.UnixNano()), rights, "arming the watchdog")
}

// Started tells the watchdog the command's process group, and its kill
// deadline from now on, at once: until then a deadline that passes kills
// lockrun too.
func (l *Link) Started(pgid int, killAt time.Time) error {
	packet := append(message(tagGroup, int64(pgid)), message(tagDeadline, killAt.UnixNano())...)
	return l.sendNow(packet, nil, "telling the watchdog of the command")
}

func (l *Link) sendNow(packet, rights []byte, what string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return ErrExited
	}
	// Only Guard and Started come before the writer's first message, so the
	// socket's buffer takes this at once.
	if err := unix.Sendmsg(l.fd, packet, rights, nil, unix.MSG_NOSIGNAL); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Arm moves the kill deadline (a time on clock.Boot).
func (l *Link) Arm(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if n := len(l.pending); n > 0 {
		l.pending = l.pending[:n-1] // a newer deadline replaces an unsent one
	}
	l.pending = append(l.pending, message(tagDeadline, at.UnixNano()))
	select { // under mu: end closes wake
	case l.wake <- struct{}{}:
	default:
	}
}

func (l *Link) writer() {
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

// Stop kills the watchdog: the command has exited, nothing is left to guard.
func (l *Link) Stop() { l.end(true) }

// Dismiss lets a watchdog that guards no command go: it exits quietly when
// its socket closes.
func (l *Link) Dismiss() { l.end(false) }

// Reaped notes that the watchdog exited on its own: its pid may be reused,
// so it must never be signalled again.
func (l *Link) Reaped() { l.end(false) }

func (l *Link) end(kill bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	l.stopped = true
	if kill {
		// Not reaped yet (only the caller reaps it), so the pid is still its.
		yield(l.pid)
		_ = syscall.Kill(l.pid, syscall.SIGKILL)
	}
	close(l.wake) // the writer closes the socket
}
