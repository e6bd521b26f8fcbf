// Package heartbeat keeps a lease alive and decides, from the local
// monotonic clock alone, when a lease that could not be renewed must be
// treated as lost: early enough that the command under the lock is dead
// before any server can hand the lock to someone else.
//
// The model: T is the TTL, s the local time at which the last successful
// renewal (or the acquisition) was sent, ε the allowed clock-rate drift. The
// server cannot expire the lease before s+T, so the local deadline is
// D = s + T·(1−ε). Without a newer renewal the holder is told to stop
// (SIGTERM) at D − grace − margin and must be dead (SIGKILL) by D − margin.
package heartbeat

import (
	"fmt"
	"time"
)

// DefaultDrift is the clock-rate difference allowed between this host and
// the server: 1%, far above what NTP-disciplined or even free-running
// quartz clocks drift (tens of ppm).
const DefaultDrift = 0.01

// Bounds on the derived safety margin; see Margin.
const (
	minMargin = 100 * time.Millisecond
	maxMargin = 2 * time.Second
)

// MinInterval is the shortest heartbeat accepted, to keep a typo from
// hammering the backend.
const MinInterval = 10 * time.Millisecond

// Policy holds the timing of one lease. Build it with NewPolicy, which fills
// defaults and rejects combinations that cannot be kept safely.
type Policy struct {
	TTL      time.Duration // lease length
	Interval time.Duration // time from one renewal to the next
	Grace    time.Duration // SIGTERM to SIGKILL
	Margin   time.Duration // SIGKILL to the local deadline
	Drift    float64       // allowed clock-rate drift, e.g. 0.01
}

// DefaultInterval is the heartbeat used when none is given: a third of the
// TTL, so two renewals can fail before the lease is at risk.
func DefaultInterval(ttl time.Duration) time.Duration { return ttl / 3 }

// DefaultGrace is the kill grace used when none is given: a sixth of the
// TTL, at most 5s, leaving the heartbeat room to retry before the kill.
func DefaultGrace(ttl time.Duration) time.Duration { return min(ttl/6, 5*time.Second) }

// Margin is the time kept between SIGKILL and the local deadline, for the
// kernel to tear the process group down: TTL/20, within [100ms, 2s].
func Margin(ttl time.Duration) time.Duration { return min(max(ttl/20, minMargin), maxMargin) }

// NewPolicy returns the policy for ttl with the given heartbeat interval and
// kill grace; zero for either picks its default. It fails, saying what to
// change, when the interval, grace and margin leave no time to renew.
func NewPolicy(ttl, interval, grace time.Duration) (Policy, error) {
	if ttl <= 0 {
		return Policy{}, fmt.Errorf("ttl %v must be positive", ttl)
	}
	if interval == 0 {
		interval = DefaultInterval(ttl)
	}
	if grace == 0 {
		grace = DefaultGrace(ttl)
	}
	p := Policy{TTL: ttl, Interval: interval, Grace: grace, Margin: Margin(ttl), Drift: DefaultDrift}
	return p, p.Validate()
}

// Validate reports why p cannot be kept safely, or nil. A policy is safe
// when a renewal sent one interval after the last one can still succeed
// before SIGTERM is due: Interval + Grace + Margin < TTL·(1−Drift).
func (p Policy) Validate() error {
	switch {
	case p.TTL <= 0:
		return fmt.Errorf("ttl %v must be positive", p.TTL)
	case p.Interval < MinInterval:
		return fmt.Errorf("heartbeat %v is too short: use at least %v", p.Interval, MinInterval)
	case p.Grace < 0:
		return fmt.Errorf("kill grace %v must not be negative", p.Grace)
	case p.Drift < 0 || p.Drift >= 0.5:
		return fmt.Errorf("drift %v must be in [0, 0.5)", p.Drift)
	}
	budget := p.life()
	if need := p.Interval + p.Grace + p.Margin; need >= budget {
		minTTL := time.Duration(float64(need)/(1-p.Drift)) + time.Millisecond
		return fmt.Errorf("heartbeat %v + kill grace %v + safety margin %v leave no time to renew within ttl %v (%v after %.0f%% clock drift): raise the ttl above %v, or lower the heartbeat or the kill grace",
			p.Interval, p.Grace, p.Margin, p.TTL, budget, p.Drift*100, minTTL.Round(time.Millisecond))
	}
	return nil
}

// life is how long after a renewal was sent the lease is surely still held.
func (p Policy) life() time.Duration {
	return p.TTL - time.Duration(float64(p.TTL)*p.Drift)
}

// Deadline is the local deadline D for a lease last renewed at sent.
func (p Policy) Deadline(sent time.Time) time.Time { return sent.Add(p.life()) }

// TermAt is when the holder must be told to stop if nothing was renewed
// after sent.
func (p Policy) TermAt(sent time.Time) time.Time { return p.KillAt(sent).Add(-p.Grace) }

// KillAt is when the holder must be killed if nothing was renewed after sent.
func (p Policy) KillAt(sent time.Time) time.Time { return p.Deadline(sent).Add(-p.Margin) }

// retryAfter is the pause after a renewal that failed without proof of
// loss: short, so a passing fault costs little lease time.
func (p Policy) retryAfter() time.Duration {
	return min(max(p.Interval/4, MinInterval), time.Second)
}
