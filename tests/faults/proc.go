package faults

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/procfs"
	"golang.org/x/sys/unix"
)

// fullPipe returns a pipe whose buffer is already full, as the stderr of a
// job whose reader hangs: the first write to w blocks until r is read.
func fullPipe() (r, w *os.File, err error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, nil, err
	}
	_, _ = unix.FcntlInt(uintptr(fds[1]), unix.F_SETPIPE_SZ, os.Getpagesize())
	for _, size := range []int{4096, 1} { // then byte by byte: no room for the shortest line
		chunk := make([]byte, size)
		for {
			if _, err := unix.Write(fds[1], chunk); err != nil {
				break
			}
		}
	}
	// Blocking again: lockrun must wait on its writes as on a real pipe.
	_ = unix.SetNonblock(fds[0], false)
	_ = unix.SetNonblock(fds[1], false)
	return os.NewFile(uintptr(fds[0]), "stderr-read"), os.NewFile(uintptr(fds[1]), "stderr-write"), nil
}

// resolve learns a's token from the oracle, for a lockrun whose log is
// not read: the run whose command is a child of a's lockrun. It returns
// when it has found it or the lockrun has died.
func (f *Fleet) resolve(a *Attempt) {
	for lockruntest.Alive(a.PID) {
		kids, _ := procfs.Children(a.PID)
		for _, l := range f.Oracle.snapshot() {
			for _, k := range kids {
				if l.pid == k && l.end.IsZero() {
					f.mu.Lock()
					a.Token, a.Acquired = l.token, l.start
					f.mu.Unlock()
					return
				}
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// stoppedState tells whether pid is stopped by a signal (state T).
func stoppedState(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	return len(f) > 0 && string(f[0]) == "T"
}

// watchdogOf finds lockrun's watchdog among its children: the watchdog
// program beside lockrun, or lockrun re-executed as its watchdog.
func watchdogOf(lockrunPID int) (int, bool) {
	kids, _ := procfs.Children(lockrunPID)
	for _, k := range kids {
		if _, ok := lockruntest.WatchdogArgs(k); ok {
			return k, true
		}
	}
	return 0, false
}
