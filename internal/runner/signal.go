package runner

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/procfs"
)

// caught is where a run receives the signals it forwards to the command.
type caught struct {
	c     chan os.Signal
	ready chan struct{} // closed once the signals are caught
}

// catchSignals starts catching the forwarded signals, in the background:
// the Go runtime enables each with a round trip to a thread of its own,
// about 0.06 ms apiece on 2 cores, which a run on the file backend spends
// taking its lock instead. Until then a signal has its default action.
func catchSignals() *caught {
	s := &caught{c: make(chan os.Signal, 8), ready: make(chan struct{})}
	go func() {
		enableSignals(s.c)
		close(s.ready)
	}()
	return s
}

// enableSignals has the forwarded signals sent to c; a test replaces it
// to play a slow runtime.
var enableSignals = func(c chan<- os.Signal) { signal.Notify(c, forwarded...) }

// wait returns once the signals are caught.
func (s *caught) wait() { <-s.ready }

// stop lets go of the signals without waiting, for the same round trips.
// A signal delivered meanwhile is dropped, as the run is over.
func (s *caught) stop() {
	go func() {
		<-s.ready
		signal.Stop(s.c)
	}()
}

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
