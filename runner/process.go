package runner

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
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
	cgMu     sync.Mutex    // the reaper drops cg while the supervisor may kill it
	cg       *cgroup       // the command's cgroup; nil where lockrun may not make one
	wd       *watchdogLink // nil without a watchdog
	wdErr    error         // why there is no watchdog
	exited   chan struct{} // closed once the command itself is reaped
	status   syscall.WaitStatus
	leftover bool          // valid once exited: other descendants remained
	gone     chan struct{} // closed once no descendant but the watchdog remains
	term     *terminal     // set when the command owns the terminal
}

// spec says what to start.
type spec struct {
	path     string
	argv     []string // argv[0] is the name as given
	env      []string
	files    []*os.File // stdin, stdout, stderr, then files to inherit
	watchdog []string   // argv of the watchdog; none when empty
	killAt   time.Time  // the watchdog's first deadline
}

// startProcess starts the command in its own process group, after its
// watchdog. The reaper it starts collects every child of this process, so
// a process that calls it must start no other children meanwhile.
func startProcess(sp spec) (*process, error) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return nil, fmt.Errorf("becoming a child subreaper: %w", err)
	}
	p := &process{exited: make(chan struct{}), gone: make(chan struct{}), term: foreground(sp.files[0])}
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

// reap starts the watchdog and the command, then reaps children until none
// remains. Linux sends the parent-death signal when the thread that forked
// the child exits, not the process, so this goroutine holds its thread
// until then.
func (p *process) reap(sp spec, attr *os.ProcAttr, started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p.cg, _ = newCgroup()
	if len(sp.watchdog) > 0 {
		argv := sp.watchdog
		if p.cg != nil {
			argv = append(argv[:len(argv):len(argv)], p.cg.dir)
		}
		p.wd, p.wdErr = startWatchdog(argv, sp.files[3:], sp.killAt)
	}
	proc, err := p.start(sp, attr)
	if err != nil {
		if p.wd != nil {
			p.wd.stop()
			_, _ = syscall.Wait4(p.wd.pid, nil, 0, nil)
		}
		p.dropCgroup()
		close(p.gone)
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

// start starts the command in its cgroup, or without one if the kernel
// refuses (no clone3, or a cgroup that may not hold processes).
func (p *process) start(sp spec, attr *os.ProcAttr) (*os.Process, error) {
	if p.cg != nil {
		sys := *attr.Sys
		sys.UseCgroupFD, sys.CgroupFD = true, p.cg.fd
		in := *attr
		in.Sys = &sys
		if proc, err := os.StartProcess(sp.path, sp.argv, &in); err == nil {
			return proc, nil
		}
		p.dropCgroup()
	}
	return os.StartProcess(sp.path, sp.argv, attr)
}

func (p *process) dropCgroup() {
	p.cgMu.Lock()
	cg := p.cg
	p.cg = nil
	p.cgMu.Unlock()
	if cg != nil {
		cg.remove()
	}
}

// killCgroupMembers kills everything in the command's cgroup, if it still has one.
func (p *process) killCgroupMembers() {
	p.cgMu.Lock()
	cg := p.cg
	p.cgMu.Unlock()
	if cg != nil {
		_ = cg.kill() // atomic: also catches processes forked meanwhile
	}
}

// reapAll reaps every child. Once the command is reaped and no other
// descendant is left, it closes gone and stops the watchdog, which guards
// the command's leftovers until then; it returns when no child remains.
func (p *process) reapAll() {
	commandDone, goneClosed := false, false
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WUNTRACED, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err == nil && ws.Stopped() {
			if pid == p.pid && p.term != nil {
				p.term.suspend(p.pid)
			}
			continue
		}
		if err != nil { // ECHILD: no child remains
			if !goneClosed {
				p.dropCgroup()
				close(p.gone)
			}
			return
		}
		if p.wd != nil && pid == p.wd.pid {
			p.wd.reaped()
		}
		if pid == p.pid {
			commandDone = true
			p.status, p.leftover = ws, p.othersAlive()
			if p.term != nil {
				p.term.reclaim(p.pid)
			}
			close(p.exited)
		}
		if commandDone && !goneClosed && !p.othersAlive() {
			if p.wd != nil {
				p.wd.stop()
			}
			p.dropCgroup()
			close(p.gone)
			goneClosed = true
		}
	}
}

// othersAlive tells whether a descendant other than the watchdog lives,
// or died and is not reaped yet. As a subreaper lockrun is an ancestor of
// every process the command started, even those that left its group or
// session, and while any of them lives one of lockrun's own children does
// (or lies a zombie until reaped): lockrun's children lists tell, with a
// few reads rather than one per process of the machine. It runs on the
// reaping goroutine, so no child can be reaped while the lists are read.
func (p *process) othersAlive() bool {
	pids, ok := procfs.Children(os.Getpid())
	if !ok {
		pids = procfs.Descendants(os.Getpid()) // slower, and blind to zombies: enough
	}
	for _, pid := range pids {
		if p.wd == nil || pid != p.wd.pid {
			return true
		}
	}
	return false
}

// arm moves the watchdog's deadline, if there is a watchdog.
func (p *process) arm(at time.Time) {
	if p.wd != nil {
		p.wd.arm(at)
	}
}

// signalGroup sends sig to the command's process group, as a terminal would.
func (p *process) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.pid, sig)
}

// signalAll sends sig to the command's process group and to every other
// descendant of this process, including those that left the group, but
// for the watchdog, which must outlive them. It returns how many
// descendants it signalled.
func (p *process) signalAll(sig syscall.Signal) int {
	pids := procfs.Descendants(os.Getpid())
	p.signalGroup(sig)
	n := 0
	for _, pid := range pids {
		if p.wd == nil || pid != p.wd.pid {
			_ = syscall.Kill(pid, sig)
			n++
		}
	}
	return n
}
