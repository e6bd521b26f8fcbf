package runner

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// process is a started command and the reaper that owns every child of this
// process. lockrun is a child subreaper, so descendants that the command
// leaves behind (even after setsid) are re-parented here: they can be found,
// signalled and waited for, and none is forgotten when the lock is released.
type process struct {
	pid      int
	exited   chan struct{} // closed once the command itself is reaped
	status   syscall.WaitStatus
	leftover bool          // descendants remained when the command exited
	gone     chan struct{} // closed once no child of ours remains
	term     *terminal     // set when the command owns the terminal
}

// startProcess starts argv[0]=path in its own process group with env and
// stdio. The reaper it starts collects every child of this process, so a
// process that calls it must start no other children meanwhile.
func startProcess(path string, argv, env []string, stdio [3]*os.File) (*process, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("becoming a child subreaper: %w", err)
	}
	p := &process{exited: make(chan struct{}), gone: make(chan struct{}), term: foreground(stdio[0])}
	sys := &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL, // the command must not outlive a SIGKILLed lockrun
	}
	if p.term != nil {
		// Interactive: the command's group takes the terminal, so it can
		// read its answers and Ctrl-C reaches it as it would without us.
		sys.Foreground, sys.Ctty = true, 0
	}
	started := make(chan error, 1)
	go p.reap(path, argv, &os.ProcAttr{Env: env, Files: stdio[:], Sys: sys}, started)
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// reap starts the command and then reaps children until none remains.
// Linux sends the parent-death signal when the thread that forked the
// child exits, not the process, so this goroutine holds its thread until
// then.
func (p *process) reap(path string, argv []string, attr *os.ProcAttr, started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(p.gone)
	proc, err := os.StartProcess(path, argv, attr)
	if err != nil {
		started <- err
		return
	}
	p.pid = proc.Pid
	_ = proc.Release() // reaped below by pid, not through os.Process
	started <- nil
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: no child remains
			return
		}
		if pid == p.pid {
			p.status, p.leftover = ws, hasChildren()
			if p.term != nil {
				p.term.reclaim()
			}
			close(p.exited)
		}
	}
}

// hasChildren tells, without reaping, whether this process has a child.
func hasChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return !errors.Is(err, syscall.ECHILD)
}

// signalGroup sends sig to the command's process group, as a terminal would.
func (p *process) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.pid, sig)
}

// signalAll sends sig to the command's process group and to every other
// descendant of this process, including those that left the group.
func (p *process) signalAll(sig syscall.Signal) int {
	pids := descendants(os.Getpid())
	p.signalGroup(sig)
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
	return len(pids)
}
