package runner

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/runner/procfs"
	"golang.org/x/sys/unix"
)

// process is a started command and the reaper that owns every child of this
// process. lockrun is a child subreaper, so descendants that the command
// leaves behind (even after setsid) are re-parented here: they can be found,
// signalled and waited for, and none is forgotten when the lock is released.
type process struct {
	pid      int
	wd       *watchdogLink // nil without a watchdog
	wdErr    error         // why there is no watchdog
	exited   chan struct{} // closed once the command itself is reaped
	status   syscall.WaitStatus
	settled  chan struct{} // closed once the command and its watchdog are reaped
	leftover bool          // valid once settled: descendants remained
	gone     chan struct{} // closed once no child of ours remains
	term     *terminal     // set when the command owns the terminal
}

// spec says what to start.
type spec struct {
	path     string
	argv     []string // argv[0] is the name as given
	env      []string
	files    []*os.File // stdin, stdout, stderr, then files to inherit
	watchdog watchdog   // already running, or why there is none
	killAt   time.Time  // the watchdog's first deadline
}

// watchdog is a started watchdog, or why none could be started.
type watchdog struct {
	link *watchdogLink // nil without a watchdog
	err  error
}

// newWatchdog starts a watchdog with argv; none when argv is empty.
func newWatchdog(argv []string) watchdog {
	if len(argv) == 0 {
		return watchdog{}
	}
	l, err := startWatchdog(argv)
	return watchdog{link: l, err: err}
}

// startProcess arms the watchdog with the first deadline, then starts the
// command in its own process group. The reaper it starts collects every
// child of this process, so a process that calls it must start no other
// children meanwhile. The watchdog is stopped if the command cannot start.
func startProcess(sp spec) (*process, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		sp.watchdog.link.discard()
		return nil, fmt.Errorf("becoming a child subreaper: %w", err)
	}
	p := &process{exited: make(chan struct{}), settled: make(chan struct{}), gone: make(chan struct{}), term: foreground(sp.files[0]),
		wd: sp.watchdog.link, wdErr: sp.watchdog.err}
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
	go p.reap(sp, &os.ProcAttr{Env: sp.env, Files: sp.files, Sys: sys}, started)
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// reap arms the watchdog and starts the command, then reaps children
// until none remains. Linux sends the parent-death signal when the thread
// that forked the child exits, not the process, so this goroutine holds its
// thread until then.
func (p *process) reap(sp spec, attr *os.ProcAttr, started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(p.gone)
	if p.wd != nil {
		p.wd.arm(sp.killAt) // written to its pipe before the command exists
	}
	proc, err := os.StartProcess(sp.path, sp.argv, attr)
	if err != nil {
		p.wd.discard()
		started <- err
		return
	}
	p.pid = proc.Pid
	_ = proc.Release() // reaped below by pid, not through os.Process
	if p.wd != nil {
		p.wd.group(p.pid)
	}
	started <- nil
	p.reapAll()
}

func (p *process) reapAll() {
	commandDone, watchdogDone := false, p.wd == nil
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: no child remains
			return
		}
		switch {
		case pid == p.pid:
			p.status, commandDone = ws, true
			if p.term != nil {
				p.term.reclaim()
			}
			if p.wd != nil {
				p.wd.stop() // nothing left to guard but leftovers, which lockrun stops itself
			}
			close(p.exited)
		case p.wd != nil && pid == p.wd.pid:
			watchdogDone = true
		default:
			continue
		}
		if commandDone && watchdogDone {
			p.leftover = hasChildren()
			close(p.settled)
		}
	}
}

// arm moves the watchdog's deadline, if there is a watchdog.
func (p *process) arm(at time.Time) {
	if p.wd != nil {
		p.wd.arm(at)
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
	pids := procfs.Descendants(os.Getpid())
	p.signalGroup(sig)
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
	return len(pids)
}
