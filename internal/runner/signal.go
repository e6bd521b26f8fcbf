package runner

import (
	"os"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/procfs"
)

// signalDescendants is procfs.SignalDescendants; a test replaces it to
// watch the order of the signals.
var signalDescendants = procfs.SignalDescendants

// signalGroup sends sig to the command's process group, as a terminal would.
func (p *process) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.pid, sig)
}

// signalAll sends sig to the command's process group at once, then hunts
// the descendants of this process that left the group, but for the
// watchdog, which must outlive them: the /proc walk costs about 10µs per
// process on the machine, and must not delay the signal that reaches
// almost everything. Each straggler is signalled through a pidfd, so that
// none can reach a reused pid. It returns how many stragglers it found.
func (p *process) signalAll(sig syscall.Signal) int {
	p.signalGroup(sig)
	return signalDescendants(os.Getpid(), sig, p.isWatchdog)
}

// killAll kills the command's cgroup (everything in it, at once) and its
// process group, then sends SIGKILL until no descendant is left alive, so
// that one forked between two /proc walks is caught by the next. It
// reports a cgroup that could not be killed.
func (p *process) killAll() error {
	err := p.killCgroupMembers()
	p.signalGroup(syscall.SIGKILL)
	for i := 0; i < 100 && signalDescendants(os.Getpid(), syscall.SIGKILL, p.isWatchdog) > 0; i++ {
		time.Sleep(time.Millisecond) // let the killed become zombies
	}
	return err
}
