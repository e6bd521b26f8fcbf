package runner

import (
	"log/slog"
	"os"
	"syscall"
	"time"
)

// forwarded are the signals lockrun passes on to the command's process
// group; the command decides what they mean, and lockrun waits for it.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// loss is how the supervisor learns that the lock is gone: Lost is closed,
// and the command must be dead by KillBy.
type loss interface {
	Lost() <-chan struct{}
	KillBy() time.Time
}

// supervisor watches one running command.
type supervisor struct {
	p        *process
	loss     loss
	sigs     <-chan os.Signal
	grace    time.Duration
	backstop time.Duration // how long after lockrun's SIGKILL the watchdog's comes
	log      *slog.Logger
}

// wait forwards signals until the command exits or the lock is lost; on
// loss it sends SIGTERM to everything the command started, then SIGKILL at
// the kill deadline. It returns the command's wait status and whether the
// lock was lost before the command ended.
func (s *supervisor) wait() (syscall.WaitStatus, bool) {
	lost := false
	lostCh := s.loss.Lost()
	var kill <-chan time.Time
	for {
		select {
		case <-s.p.exited:
			// After a freeze the command may be reaped before the
			// heartbeat has run: a lease past its kill deadline is lost.
			lost = lost || isClosed(s.loss.Lost()) || !time.Now().Before(s.loss.KillBy())
			return s.p.status, lost
		case <-lostCh:
			lostCh, lost = nil, true
			killBy := s.loss.KillBy()
			s.log.Error("lock lost: stopping the command", "event", EventLost, "pid", s.p.pid, "kill_in", time.Until(killBy).Round(time.Millisecond))
			s.p.arm(killBy.Add(s.backstop)) // the watchdog, too, kills by the new deadline
			s.p.signalAll(syscall.SIGTERM)
			kill = time.After(time.Until(killBy))
		case <-kill:
			kill = nil
			s.log.Error("command still running at the kill deadline: sending SIGKILL", "pid", s.p.pid)
			s.p.killAll()
		case sig := <-s.sigs:
			s.log.Info("forwarding signal to the command", "signal", sig.String())
			s.p.signalGroup(sig.(syscall.Signal))
		}
	}
}

// cleanup stops what the command left running after it exited: SIGTERM,
// then SIGKILL when the grace ends or at the kill deadline if the lock is
// lost meanwhile, whichever is first. The lock is only released after
// this, so that no leftover of one run overlaps the next; the heartbeat
// and the watchdog keep guarding the lease until then.
func (s *supervisor) cleanup(lost bool) {
	if !s.p.leftover {
		<-s.p.gone
		return
	}
	if n := s.p.signalAll(syscall.SIGTERM); !lost {
		s.log.Warn("the command left processes behind: stopping them before releasing the lock", "count", n)
	}
	lostCh := s.loss.Lost()
	kill := time.NewTimer(time.Until(s.killAt(time.Now().Add(s.grace))))
	defer kill.Stop()
	for {
		select {
		case <-s.p.gone:
			return
		case <-lostCh:
			lostCh = nil
			s.p.arm(s.loss.KillBy().Add(s.backstop))
			kill.Reset(time.Until(s.killAt(time.Now().Add(s.grace))))
		case <-kill.C:
			s.p.killAll()
			<-s.p.gone
			return
		}
	}
}

// killAt is at, or the kill deadline if the lock is lost and that comes
// first.
func (s *supervisor) killAt(at time.Time) time.Time {
	if isClosed(s.loss.Lost()) && s.loss.KillBy().Before(at) {
		return s.loss.KillBy()
	}
	return at
}

// killAll sends SIGKILL until no descendant is left alive, so that one
// forked between two /proc walks is caught by the next.
func (p *process) killAll() {
	p.killCgroupMembers()
	for i := 0; i < 100 && p.signalAll(syscall.SIGKILL) > 0; i++ {
		time.Sleep(time.Millisecond) // let the killed become zombies
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
