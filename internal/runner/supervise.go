package runner

import (
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/clock"
	"golang.org/x/sys/unix"
)

// forwarded are the signals lockrun passes on to the command's process
// group; the command decides what they mean, and lockrun waits for it.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// loss is how the supervisor learns that the lock is gone: Lost is closed,
// Err says why, and the command must be dead by KillBy.
type loss interface {
	Lost() <-chan struct{}
	KillBy() time.Time
	Err() error
}

// supervisor watches one running command, and stops it (SIGTERM, then
// SIGKILL at a kill deadline) when the lock is lost, its watchdog dies or
// it reaches its --max-run.
type supervisor struct {
	p        *process
	loss     loss
	clock    clock.Clock
	sigs     <-chan os.Signal
	grace    time.Duration
	backstop time.Duration // how long after lockrun's SIGKILL the watchdog's comes
	maxRunAt time.Time     // when the command has run its --max-run; zero for no limit
	log      *slog.Logger

	why      error           // why the command is being stopped; nil while it runs freely
	killAt   time.Time       // when SIGKILL is due, once stopping
	killCh   <-chan struct{} // fires at killAt
	stopKill func()
}

// wait forwards signals until the command exits, stopping it when it must.
// It returns the command's wait status and why it was stopped, if it was.
func (s *supervisor) wait() (syscall.WaitStatus, error) {
	s.stopKill = func() {}
	defer func() { s.stopKill() }()
	lostCh, wdCh := s.loss.Lost(), (<-chan struct{})(s.p.wdDied)
	var maxCh <-chan struct{}
	if !s.maxRunAt.IsZero() {
		c, stop := s.clock.At(s.maxRunAt)
		defer stop()
		maxCh = c
	}
	for {
		select {
		case <-s.p.exited:
			// After a freeze the command may be reaped before the
			// heartbeat has run: a lease past its kill deadline is lost.
			if isClosed(s.loss.Lost()) || !s.clock.Now().Before(s.loss.KillBy()) {
				s.why = s.lossCause()
			}
			return s.p.status, s.why
		case <-lostCh:
			lostCh = nil
			s.why = s.lossCause() // a loss outranks every other reason to stop
			if !s.stop(s.loss.KillBy(), "lock lost: stopped the command", "event", EventLost) {
				// A stop under way kills sooner; the loss is still an event.
				s.log.Error("lock lost while the command was being stopped", "event", EventLost, "pid", s.p.pid,
					"reason", s.why.Error(), "kill_in", s.killAt.Sub(s.clock.Now()).Round(time.Millisecond))
			}
		case <-wdCh:
			wdCh = nil
			s.stopSoon(fmt.Errorf("%w (pid %d, %s)", ErrUnguarded, s.p.wd.Pid(), describe(s.p.wdStatus)), "the watchdog died: stopped the command")
		case <-maxCh:
			maxCh = nil
			s.stopSoon(ErrMaxRun, "the command reached its --max-run: stopped it")
		case <-s.killCh:
			s.killCh = nil
			err := s.p.killAll()
			s.log.Error("command still running at the kill deadline: sent SIGKILL", "pid", s.p.pid)
			s.reportCgroupKill(err)
		case sig := <-s.sigs:
			s.p.signalGroup(sig.(syscall.Signal))
			s.log.Info("forwarded a signal to the command", "signal", sig.String())
		}
	}
}

// stopSoon stops the command for why, within the grace (or by the kill
// deadline of the lease, if that comes first). A reason already given
// stands.
func (s *supervisor) stopSoon(why error, msg string) {
	if s.why == nil {
		s.why = why
	}
	s.stop(minTime(s.clock.Now().Add(s.grace), s.loss.KillBy()), msg)
}

// stop sends SIGTERM to everything the command started (once) and makes
// killBy the kill deadline if it is sooner than the one set; it reports
// whether it did, and logs msg with attrs if so. Signals go first, the log
// line after: a stderr that blocks must not delay them.
func (s *supervisor) stop(killBy time.Time, msg string, attrs ...any) bool {
	first := s.killAt.IsZero()
	if !first && !killBy.Before(s.killAt) {
		return false
	}
	s.killAt = killBy
	s.p.arm(killBy.Add(s.backstop)) // the watchdog, too, kills by the new deadline
	if first {
		s.p.signalAll(syscall.SIGTERM)
	}
	s.stopKill()
	s.killCh, s.stopKill = s.clock.At(killBy)
	s.log.Error(msg, append(attrs, "pid", s.p.pid, "reason", s.why.Error(), "kill_in", killBy.Sub(s.clock.Now()).Round(time.Millisecond))...)
	return true
}

// lossCause says why the lease is lost.
func (s *supervisor) lossCause() error {
	if err := s.loss.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%w: the lease outlived its kill deadline (was lockrun frozen?)", backend.ErrLost)
}

// reportCgroupKill warns, once the signals are sent, that the cgroup could
// not be killed: the /proc walk was all there was.
func (s *supervisor) reportCgroupKill(err error) {
	if err != nil {
		s.log.Warn("could not kill the command's cgroup; killed what a walk of /proc found", "err", err)
	}
}

// describe says how a process ended.
func describe(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + unix.SignalName(ws.Signal()) // Signal().String() is "killed"
	}
	return fmt.Sprintf("exit status %d", ws.ExitStatus())
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
