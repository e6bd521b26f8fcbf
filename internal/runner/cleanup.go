package runner

import (
	"syscall"
	"time"
)

// cleanup stops what the command left running after it exited: SIGTERM,
// then SIGKILL when the grace ends, or sooner at the kill deadline of a
// lost lease or of a stop already under way, or at once if the watchdog
// dies. The lock is only released after this, so that no leftover of one
// run overlaps the next; the heartbeat and the watchdog keep guarding the
// lease until then.
func (s *supervisor) cleanup() {
	if !s.p.leftover {
		<-s.p.gone
		return
	}
	if n := s.p.signalAll(syscall.SIGTERM); s.why == nil {
		s.log.Warn("the command left processes behind: stopping them before releasing the lock", "count", n)
	}
	lostCh, wdCh := s.loss.Lost(), (<-chan struct{})(s.p.wdDied)
	kill, stop := s.clock.At(s.limit(s.clock.Now().Add(s.grace)))
	defer func() { stop() }()
	for {
		select {
		case <-s.p.gone:
			return
		case <-lostCh:
			lostCh = nil
			s.p.arm(s.loss.KillBy().Add(s.backstop))
			stop()
			kill, stop = s.clock.At(s.limit(s.clock.Now().Add(s.grace)))
		case <-wdCh:
			wdCh = nil
			stop()
			kill, stop = s.clock.At(s.clock.Now()) // nothing guards them now: at once
		case <-kill:
			s.reportCgroupKill(s.p.killAll())
			<-s.p.gone
			return
		}
	}
}

// limit is at, or the kill deadline of a lost lease or of a stop under way
// if that comes first.
func (s *supervisor) limit(at time.Time) time.Time {
	if isClosed(s.loss.Lost()) {
		at = minTime(at, s.loss.KillBy())
	}
	if !s.killAt.IsZero() {
		at = minTime(at, s.killAt)
	}
	return at
}
