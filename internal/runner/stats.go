package runner

import "time"

// Lifecycle events: the value of the "event" field of the log lines that
// mark a run's life, stable names that log pipelines count (see
// docs/events.md). The heartbeat logs "renewed" and "renewal_failed".
const (
	EventWaiting       = "waiting"        // asking for the lock, prepared to wait for it
	EventAcquired      = "acquired"       // the lock is held; the command starts next
	EventRenewed       = "renewed"        // a renewal succeeded (logged by the heartbeat)
	EventRenewalFailed = "renewal_failed" // a renewal failed; it is retried until the deadline
	EventLost          = "lost"           // ownership is gone; the command is being stopped
	EventReleased      = "released"       // the lock was given back after the command's tree died
	EventExited        = "exited"         // the command ended; its status is in "status"
	EventFailOpen      = "fail_open"      // the backend was unreachable; the command runs unlocked
)

// Stats are the figures of one run, filled in by Run and RunUnlocked for
// whoever asked for them (the metrics file). A nil *Stats records nothing.
type Stats struct {
	Waited   time.Duration // from asking for the lock to its grant or refusal
	Ran      time.Duration // from the command's start to the end of its tree
	Started  bool          // the command was started
	Lost     bool          // the lock was lost while the command ran
	FailOpen bool          // the command ran without the lock (--fail-open)
}

func (s *Stats) waited(d time.Duration) {
	if s != nil {
		s.Waited = d
	}
}

func (s *Stats) ran(d time.Duration, lost bool) {
	if s != nil {
		s.Started, s.Ran, s.Lost = true, d, lost
	}
}

func (s *Stats) failOpen() {
	if s != nil {
		s.FailOpen = true
	}
}
