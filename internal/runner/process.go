package runner

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/procfs"
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
	wdArgv   []string      // how to start the watchdog; none when empty
	wd       *watchdogLink // nil without a watchdog
	wdErr    error         // why there is no watchdog
	exited   chan struct{} // closed once the command itself is reaped
	status   syscall.WaitStatus
	leftover bool          // valid once exited: other descendants remained
	gone     chan struct{} // closed once no descendant but the watchdog remains
	reaped   chan struct{} // closed once no child remains, the watchdog included
	term     *terminal     // set when the command owns the terminal
}

// spec says what to start.
type spec struct {
	path   string
	argv   []string // argv[0] is the name as given
	env    []string
	files  []*os.File // stdin, stdout, stderr, then the lock's files to inherit
	killAt time.Time  // the watchdog's first deadline
}

// becomeSubreaper makes this process the reaper of every process the
// command starts, even one that leaves its group or session. The reaper
// that start starts will collect every child of this process, so a
// process that calls it must start no other children until the command
// has ended.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("becoming a child subreaper: %w", err)
	}
	return nil
}

// prepare readies what guards a command: its cgroup, and the watchdog
// (argv, none when empty). A waiter calls it before it asks for the lock,
// so that none of it delays the command's start once the lock is granted.
func prepare(watchdog []string) *process {
	p := &process{exited: make(chan struct{}), gone: make(chan struct{}), reaped: make(chan struct{})}
	p.cg, _ = newCgroup()
	if len(watchdog) > 0 {
		p.wdArgv = watchdog
		if p.cg != nil {
			p.wdArgv = append(watchdog[:len(watchdog):len(watchdog)], p.cg.dir)
		}
		p.wd, p.wdErr = startWatchdog(p.wdArgv)
	}
	return p
}

// abandon undoes prepare when no command is to start.
func (p *process) abandon() {
	if p.wd != nil {
		p.wd.stop()
		_, _ = syscall.Wait4(p.wd.pid, nil, 0, nil)
	}
	p.dropCgroup()
	close(p.gone)
	close(p.reaped)
}

// start arms the watchdog and starts the command in its own process group
// and cgroup. On failure it abandons what prepare readied.
func (p *process) start(sp spec) error {
	p.armWatchdog(sp)
	p.term = foreground(sp.files[0])
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
	return <-started
}

// armWatchdog gives the watchdog its first deadline and the lock's files.
// A watchdog that died while lockrun waited for the lock (the OOM killer,
// an operator's kill) is replaced once: the command starts unguarded only
// if no watchdog can be started at all.
func (p *process) armWatchdog(sp spec) {
	for replaced := false; p.wd != nil; replaced = true {
		err := p.wd.guard(sp.killAt, sp.files[3:])
		if err == nil {
			return
		}
		p.wd.stop()
		_, _ = syscall.Wait4(p.wd.pid, nil, 0, nil) // the reaper does not run yet
		if replaced {
			p.wd, p.wdErr = nil, err
			return
		}
		p.wd, p.wdErr = startWatchdog(p.wdArgv)
	}
}

// reap starts the command, then reaps children until none remains. Linux
// sends the parent-death signal when the thread that forked the child
// exits, not the process, so this goroutine holds its thread until then.
func (p *process) reap(sp spec, attr *os.ProcAttr, started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	proc, err := p.spawn(sp, attr)
	if err != nil {
		p.abandon()
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

// spawn starts the command in its cgroup, or without one if the kernel
// refuses (no clone3, or a cgroup that may not hold processes).
func (p *process) spawn(sp spec, attr *os.ProcAttr) (*os.Process, error) {
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
	defer close(p.reaped)
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
		others := false
		if pid == p.pid || (commandDone && !goneClosed) {
			others = p.othersAlive()
		}
		if pid == p.pid {
			commandDone = true
			p.status, p.leftover = ws, others
			if p.term != nil {
				p.term.reclaim(p.pid)
			}
			close(p.exited)
		}
		if commandDone && !goneClosed && !others {
			// Nothing is left to guard: the lock may go at once, and the
			// watchdog and the cgroup after it.
			close(p.gone)
			goneClosed = true
			if p.wd != nil {
				p.wd.stop()
			}
			p.dropCgroup()
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
