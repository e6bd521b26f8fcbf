package runner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/procfs"
	"golang.org/x/sys/unix"
)

// Watch is the watchdog's side (see watchdogLink): it reads messages from
// in until the socket closes or the deadline passes, then kills the
// command's process group, everything in the command's cgroup (the
// directory cgroupDir, if not empty) and every other descendant of lockrun
// (pid) still alive. A watchdog that was never armed guards no command:
// when lockrun goes, it removes the empty cgroup and exits quietly.
func Watch(in *os.File, lockrun int, cgroupDir string) error {
	// Signals meant for the command or for lockrun must not end the one
	// process that holds the deadline when lockrun cannot; nor may a
	// stderr whose reader has gone.
	signal.Ignore(forwarded...)
	signal.Ignore(syscall.SIGPIPE)
	fd := int(in.Fd())
	if err := unix.SetNonblock(fd, true); err != nil {
		return err
	}
	w := watch{lockrun: lockrun, cgroupDir: cgroupDir}
	buf, oob := make([]byte, 64), make([]byte, unix.CmsgSpace(64*4))
	for {
		timeout := time.Duration(-1)
		if w.deadline != 0 {
			if timeout = time.Duration(w.deadline - monotonicNS(time.Now())); timeout <= 0 {
				w.kill("lockrun did not renew the lease in time")
				return nil
			}
		}
		err := waitReadable(fd, timeout)
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

// watch is the watchdog's state.
type watch struct {
	lockrun   int
	cgroupDir string
	pgid      int   // the command's process group; 0 until told
	deadline  int64 // CLOCK_MONOTONIC ns; 0 until armed
	held      []int // the lock's files: open until this process exits
}

// read applies the messages of one packet.
func (w *watch) read(packet []byte) {
	for ; len(packet) >= msgLen; packet = packet[msgLen:] {
		v := int64(binary.BigEndian.Uint64(packet[1:msgLen]))
		switch packet[0] {
		case 'g':
			w.pgid = int(v)
		case 'd':
			w.deadline = v
		}
	}
}

// kill kills the command and what it started (see killTree), then says
// why: a stderr that blocks must not delay the kill.
func (w *watch) kill(why string) {
	killTree(w.pgid, w.lockrun, w.cgroupDir)
	say("lockrun: watchdog: " + why + ": killed the command")
}

// leave removes the command's cgroup, made for a command that never
// started: it is empty, and rmdir refuses one that is not.
func (w *watch) leave() {
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
func killTree(pgid, lockrun int, cgroupDir string) {
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
}
