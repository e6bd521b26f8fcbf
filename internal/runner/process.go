package runner

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/clock"
	"github.com/lockrun/lockrun/internal/procfs"
	"github.com/lockrun/lockrun/internal/watchdog"
	"golang.org/x/sys/unix"
)

// process is a started command and the reaper that owns every child of this
// process. lockrun is a child subreaper, so descendants that the command
// leaves behind (even after setsid) are re-parented here: they can be found,
// signalled and waited for, and none is forgotten when the lock is released.
type process struct {
	pid      int
	clock    clock.Clock
	cgMu     sync.Mutex    // the reaper drops cg while the supervisor may kill it
	cg       *cgroup       // the command's cgroup; nil when the command is not contained
	cgWhy    error         // why the command is not contained in a cgroup
	ready    chan struct{} // closed once prepare's cgroup and watchdog are made
	dropped  atomic.Bool   // abandon was called: prepare makes nothing more
	answered chan struct{} // closed by answer: the lock is taken, or the backend said no
	answer1  sync.Once
	wdProg   *watchdog.Program
	wd       *watchdog.Link // nil without a watchdog
	wdErr    error          // why there is no watchdog
	wdDied   chan struct{}  // closed when the watchdog exits while it guards
	wdStatus syscall.WaitStatus
	exited   chan struct{} // closed once the command itself is reaped
	status   syscall.WaitStatus
	leftover bool          // valid once exited: other descendants remained
	gone     chan struct{} // closed once no descendant but the watchdog remains
	reaped   chan struct{} // closed once no child remains, the watchdog included
	term     *terminal     // set when the command owns the terminal
	reaper   int           // reap's thread: it forks the command and reaps every child
}

// spec says what to start.
type spec struct {
	path   string
	argv   []string // argv[0] is the name as given
	env    []string
	files  []*os.File // stdin, stdout, stderr, then the lock's files to inherit
	termAt time.Time  // the command must not start at or after this
	killAt time.Time  // the watchdog's deadline once the command runs
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

// makeCgroup is newCgroup; a test replaces it to play a host without
// cgroups.
var makeCgroup = newCgroup

// prepare readies what guards a command: its cgroup, and the watchdog
// (none when wd is nil), in the background, and start waits for them. A
// waiter calls it before it asks for the lock, so that none of it delays
// the command's start once the lock is granted. With untilAnswer, the
// watchdog waits for answer, and only the cgroup is made meanwhile: a
// busy first answer then costs a cgroup's mkdir and rmdir, never a
// watchdog's start (a grant that failed after the lock was taken, and
// was retried, may have started one). Nothing is made before after is closed (nil: at once): a run
// killed by a signal it has not caught yet must leave no cgroup behind.
// A run that does not get the lock abandons them.
func prepare(wd *watchdog.Program, clk clock.Clock, untilAnswer bool, after <-chan struct{}) *process {
	p := &process{clock: clk, wdProg: wd, ready: make(chan struct{}), wdDied: make(chan struct{}),
		exited: make(chan struct{}), gone: make(chan struct{}), reaped: make(chan struct{}), answered: make(chan struct{})}
	go func() {
		defer close(p.ready)
		if after != nil {
			<-after
		}
		if p.dropped.Load() {
			return
		}
		p.cg, p.cgWhy = makeCgroup()
		if untilAnswer {
			<-p.answered
		}
		if wd != nil && !p.dropped.Load() {
			p.wd, p.wdErr = watchdog.Start(*wd, p.cgroupDir())
		}
	}()
	return p
}

func (p *process) cgroupDir() string {
	if p.cg == nil {
		return ""
	}
	return p.cg.dir
}

// answer tells prepare that the lock is taken (see
// backend.AcquireOptions.Granting) or that the backend has answered: a
// watchdog held back for the answer starts now, unless abandon came
// first. The grant may still fail after it.
func (p *process) answer() { p.answer1.Do(func() { close(p.answered) }) }

// abandon undoes prepare when no command is to start.
func (p *process) abandon() {
	p.dropped.Store(true)
	p.answer()
	<-p.ready
	if p.wd != nil {
		p.wd.Stop()
		_, _ = syscall.Wait4(p.wd.Pid(), nil, 0, nil)
	}
	p.dropCgroup()
	close(p.gone)
	close(p.reaped)
}

// errNoWatchdog is why a command that was to have a watchdog did not start.
var errNoWatchdog = errors.New("no watchdog could be started to guard the command")

// start arms the watchdog and starts the command in its own process group
// and cgroup. On failure it abandons what prepare readied. A command that
// was to have a watchdog never starts without one.
func (p *process) start(sp spec) error {
	<-p.ready
	if err := p.armWatchdog(sp); err != nil {
		p.abandon()
		return err
	}
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

// armWatchdog gives the watchdog the latest start time and the lock's
// files. A watchdog that could not start, or died while lockrun waited for
// the lock (the OOM killer, an operator's kill), is replaced; if none can
// be had the command does not start.
func (p *process) armWatchdog(sp spec) error {
	if p.wdProg == nil {
		return nil
	}
	for attempt := 0; attempt < 2; attempt++ {
		if p.wd == nil {
			if p.wd, p.wdErr = watchdog.Start(*p.wdProg, p.cgroupDir()); p.wd == nil {
				continue
			}
		}
		if p.wdErr = p.wd.Guard(sp.termAt, sp.files[3:]); p.wdErr == nil {
			return nil
		}
		p.wd.Stop()
		_, _ = syscall.Wait4(p.wd.Pid(), nil, 0, nil) // the reaper does not run yet
		p.wd = nil
	}
	return fmt.Errorf("%w: %v", errNoWatchdog, p.wdErr)
}

// reap starts the command, then reaps children until none remains. Linux
// sends the parent-death signal when the thread that forked the child
// exits, not the process, so this goroutine holds its thread until then.
func (p *process) reap(sp spec, attr *os.ProcAttr, started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p.reaper = unix.Gettid()
	pid, err := p.spawn(sp, attr)
	if err != nil {
		p.abandon()
		started <- err
		return
	}
	p.pid = pid // reaped below
	if p.wd != nil {
		// If the watchdog is gone already, reapAll reports it.
		_ = p.wd.Started(p.pid, sp.killAt)
	}
	started <- nil
	p.reapAll()
}

// dropCgroup removes the command's cgroup, if it has one.
func (p *process) dropCgroup() {
	p.cgMu.Lock()
	cg := p.cg
	p.cg = nil
	p.cgMu.Unlock()
	if cg != nil {
		cg.remove()
	}
}

// killCgroupMembers kills everything in the command's cgroup, if it still
// has one, at once (cgroup.kill). If that fails it signals each process
// the cgroup lists, and reports the failure.
func (p *process) killCgroupMembers() error {
	p.cgMu.Lock()
	cg := p.cg
	p.cgMu.Unlock()
	if cg == nil {
		return nil
	}
	err := cg.kill() // atomic: also catches processes forked meanwhile
	if err != nil {
		for _, pid := range procfs.CgroupProcs(cg.dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // a member reaped since the read leaves its pid free: a rare, brief risk on a rare path
		}
	}
	return err
}
