package watchdog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/clock"
	"github.com/lockrun/lockrun/internal/procfs"
	"golang.org/x/sys/unix"
)

// ErrUsage is the error of arguments Main cannot parse.
var ErrUsage = errors.New("watchdog: want the pid of lockrun, and the command's cgroup if it has one")

// ErrProtocol is the error of a watchdog started by a lockrun that speaks
// another protocol: one of another release.
var ErrProtocol = errors.New("watchdog: lockrun and " + ProgramName + " are from different releases; install both from the same one")

// Main is the watchdog's program: in is its end of the socket, args what
// follows Program.Args (lockrun's pid, then the cgroup directory if any).
// It returns ErrProtocol, before it reads anything, when the lockrun that
// started it speaks another protocol, and ErrUsage when no lockrun did.
func Main(in *os.File, args []string) error {
	switch got := os.Getenv(envProtocol); {
	case got == "":
		return fmt.Errorf("%w; it is started by lockrun run, not by hand", ErrUsage)
	case got != protocol:
		return fmt.Errorf("%w (protocol %q, this watchdog's is %q)", ErrProtocol, got, protocol)
	}
	if len(args) < 1 || len(args) > 2 {
		return ErrUsage
	}
	pid, err := strconv.Atoi(args[0])
	if err != nil || pid <= 0 {
		return ErrUsage
	}
	cgroupDir := ""
	if len(args) == 2 {
		cgroupDir = args[1]
	}
	return watch(in, pid, cgroupDir)
}

// watch reads messages from in until the socket closes or the deadline
// passes, then kills (see killTree).
func watch(in *os.File, lockrun int, cgroupDir string) error {
	// Signals meant for the command or for lockrun must not end the one
	// process that holds the deadline when lockrun cannot; nor may a
	// stderr whose reader has gone. (The watchdog becomes real-time a
	// little later: see realtimeDue.)
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	fd := int(in.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		return err
	}
	timer, err := clock.NewTimerfd()
	if err != nil {
		return err
	}
	w := state{lockrun: lockrun, cgroupDir: cgroupDir, pidfd: -1, runID: os.Getenv(envRunID)}
	if pfd, err := unix.PidfdOpen(lockrun, 0); err == nil {
		w.pidfd = pfd // pins lockrun: a kill cannot reach a reused pid
	}
	return w.loop(fd, timer)
}

// state is the watchdog's.
type state struct {
	lockrun   int
	pidfd     int // lockrun's, or -1 without pidfds
	cgroupDir string
	pgid      int   // the command's process group; 0 until told
	deadline  int64 // CLOCK_BOOTTIME ns; 0 until armed
	held      []int // the lock's files: open until this process exits
	runID     string
	seen      tree // lockrun's tree at the last deadline, without a cgroup
}

func (w *state) loop(fd int, timer *clock.Timerfd) error {
	buf, oob := make([]byte, 64), make([]byte, unix.CmsgSpace(64*4))
	set, rtAt := int64(0), clock.BootNS()+int64(realtimeAfter)
	for {
		if rtAt != 0 && realtimeDue(clock.BootNS(), rtAt, w.deadline) {
			raisePriority()
			rtAt = 0
		}
		if w.deadline != 0 && clock.BootNS() >= w.deadline {
			w.expire()
			return nil
		}
		if next := earliest(w.deadline, rtAt); next != set {
			if err := timer.Set(next); err != nil {
				w.kill("could not set a timer")
				return err
			}
			set = next
		}
		err := waitReadable(fd, timer.Fd())
		var n, oobn, flags int
		if err == nil {
			n, oobn, flags, _, err = unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
		}
		switch {
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			w.kill("reading from lockrun failed")
			return err
		case n == 0 && w.deadline == 0:
			w.leave()
			return nil
		case n == 0:
			w.kill("lockrun died")
			return nil
		}
		w.held = append(w.held, rights(oob[:oobn])...)
		if flags&unix.MSG_CTRUNC != 0 {
			say("lockrun: watchdog: could not take the lock's files; the command holds them alone")
		}
		w.read(buf[:n])
	}
}

// read applies the messages of one packet.
func (w *state) read(packet []byte) {
	for ; len(packet) >= msgLen; packet = packet[msgLen:] {
		v := int64(binary.BigEndian.Uint64(packet[1:msgLen]))
		switch packet[0] {
		case tagGroup:
			w.pgid = int(v)
		case tagDeadline:
			w.deadline = v
		}
	}
	if w.cgroupDir == "" {
		w.seen = refresh(w.lockrun)
	}
}

// expire acts on a deadline that passed. Before lockrun said the command
// started, lockrun is frozen (or far behind) between the grant and the
// exec, and must never start the command once it wakes, after its term
// deadline: it is stopped (it may not be frozen, only slow), whatever it
// started is killed while still its child, then lockrun is killed. If
// lockrun froze just after the exec, before it could say so, the command
// is there to see: it is killed as a started command is, and lockrun is
// left to wake and report the loss.
func (w *state) expire() {
	if w.pgid == 0 {
		w.pgid = w.startedGroup()
	}
	if w.pgid != 0 {
		w.kill("lockrun did not renew the lease in time")
		return
	}
	w.signalLockrun(unix.SIGSTOP)
	killTree(0, w.lockrun, w.cgroupDir)
	w.signalLockrun(unix.SIGKILL)
	say("lockrun: watchdog: lockrun had not started the command by its term deadline (frozen?): killed lockrun")
}

// startedGroup is the process group of the command if lockrun has started
// it: a child of lockrun, other than this watchdog, that leads its own
// group, as lockrun starts the command. 0 if there is none.
func (w *state) startedGroup() int {
	kids, _ := procfs.Children(w.lockrun)
	for _, pid := range kids {
		if pgid, ok := procfs.Group(pid); ok && pgid == pid && pid != os.Getpid() {
			return pgid
		}
	}
	return 0
}

// signalLockrun signals lockrun through its pidfd, or by pid while lockrun
// is still this process's parent (so the pid is still lockrun's).
func (w *state) signalLockrun(sig unix.Signal) {
	if w.pidfd >= 0 {
		_ = unix.PidfdSendSignal(w.pidfd, sig, nil, 0)
		return
	}
	if os.Getppid() == w.lockrun {
		_ = syscall.Kill(w.lockrun, sig)
	}
}

// kill kills the command and what it started (see killTree), then says
// why: a stderr that blocks must not delay the kill.
func (w *state) kill(why string) {
	if w.cgroupDir == "" {
		w.seen.kill()
	}
	killTree(w.pgid, w.lockrun, w.cgroupDir)
	if w.cgroupDir == "" {
		killByRunID(w.runID)
	}
	say("lockrun: watchdog: " + why + ": killed the command")
}

// leave removes the command's cgroup, made for a command that never
// started: it is empty, and rmdir refuses one that is not.
func (w *state) leave() {
	if w.cgroupDir != "" {
		_ = unix.Rmdir(w.cgroupDir)
	}
}

// say writes msg to stderr, giving up after a moment: the watchdog holds
// the lock's files, so it must exit even when no one reads its stderr.
func say(msg string) {
	done := make(chan struct{})
	go func() {
		fmt.Fprintln(os.Stderr, msg)
		close(done)
	}()
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// rights are the file descriptors an SCM_RIGHTS message brought.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	return fds
}

// waitReadable blocks until the socket fd is readable or the timer fires.
// The timer is a CLOCK_BOOTTIME timerfd, which a suspend does not hold back
// as it would a poll timeout.
func waitReadable(fd, timer int) error {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(timer), Events: unix.POLLIN}}
	_, err := unix.Ppoll(fds, nil, nil)
	if errors.Is(err, syscall.EINTR) {
		return nil
	}
	if err == nil && fds[0].Revents == 0 {
		return syscall.EAGAIN // the timer: the loop checks the deadline
	}
	return err
}
