package runner

import (
	"errors"
	"os"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/procfs"
)

// reapAll reaps every child. Once the command is reaped and no other
// descendant is left, it closes gone and stops the watchdog, which guards
// the command's leftovers until then; a watchdog that dies before that
// closes wdDied. It removes the cgroup and returns when no child remains:
// once the stopped watchdog is reaped, not as gone lets the release go.
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
			p.dropCgroup()
			if !goneClosed {
				close(p.gone)
			}
			return
		}
		if p.wd != nil && pid == p.wd.Pid() {
			p.wd.Reaped()
			if !goneClosed {
				p.wdStatus = ws
				close(p.wdDied)
			}
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
				p.wd.Stop()
			}
		}
	}
}

// othersAlive tells whether a descendant other than the watchdog lives,
// or died and is not reaped yet. As a subreaper lockrun is an ancestor of
// every process the command started, even those that left its group or
// session, and while any of them lives one of lockrun's own children does
// (or lies a zombie until reaped). Two children lists tell, a few reads
// rather than one per process of the machine: this thread's, which forked
// the command, and the main thread's. The kernel hands an orphan to its
// subreaper's first live thread, the main thread, which never exits in a
// Go program (older kernels: to the thread that forked its ancestor, this
// one); the watchdog, which does not count, may be on any thread's list.
// It runs on the reaping goroutine, locked to that thread, so no child can
// be reaped while the lists are read.
func (p *process) othersAlive() bool {
	pid := os.Getpid()
	pids, ok := procfs.ThreadChildren(pid, pid, p.reaper)
	if !ok {
		pids = procfs.Descendants(pid) // slower, and blind to zombies: enough
	}
	for _, pid := range pids {
		if !p.isWatchdog(pid) {
			return true
		}
	}
	return false
}

func (p *process) isWatchdog(pid int) bool { return p.wd != nil && pid == p.wd.Pid() }

// arm moves the watchdog's deadline, if there is a watchdog.
func (p *process) arm(at time.Time) {
	if p.wd != nil {
		p.wd.Arm(at)
	}
}
