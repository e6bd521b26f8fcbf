// Package heartbeat keeps a lease alive and decides, from the local clock
// alone, when a lease that could not be renewed must be treated as lost:
// early enough that the command under the lock is dead before any server
// can hand the lock to someone else. The clock is CLOCK_BOOTTIME (see
// internal/clock), which counts suspend as the servers' lease clocks do.
//
// The model: T is the TTL, s the local time at which the last successful
// renewal (or the acquisition) was sent, ε the allowed clock-rate drift. The
// server cannot expire the lease before s+T, so the local deadline is
// D = s + T·(1−ε). Without a newer renewal the holder is told to stop
// (SIGTERM) at D − grace − margin and must be dead (SIGKILL) by D − margin.
package heartbeat

import (
	"errors"
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

// MaxTTL is the longest lease: a year. Past it the backends' arithmetic
// (nanoseconds plus drift, milliseconds rounded up, etcd's lease limit)
// overflowed into leases that had expired before the command started.
const MaxTTL = 8760 * time.Hour

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

// Setting changes one timing of a policy from its default.
type Setting func(*Policy)

// WithInterval sets the time between renewals (default: DefaultInterval).
func WithInterval(d time.Duration) Setting { return func(p *Policy) { p.Interval = d } }

// WithGrace sets the time from SIGTERM to SIGKILL (default: DefaultGrace);
// zero sends SIGKILL at once.
func WithGrace(d time.Duration) Setting { return func(p *Policy) { p.Grace = d } }

// NewPolicy returns the policy for ttl: the defaults, changed by settings.
// It fails, saying what to change, when the timings leave no time to renew.
func NewPolicy(ttl time.Duration, settings ...Setting) (Policy, error) {
	p := policyFor(ttl, settings)
	err := p.Validate()
	if errors.Is(err, errTooTight) {
		if least := minTTL(settings); least > 0 {
			err = fmt.Errorf("%w: use a ttl of at least %v, or a shorter heartbeat or kill grace", err, least)
		}
	}
	return p, err
}

func policyFor(ttl time.Duration, settings []Setting) Policy {
	p := Policy{TTL: ttl, Interval: DefaultInterval(ttl), Grace: DefaultGrace(ttl), Margin: Margin(ttl), Drift: DefaultDrift}
	for _, s := range settings {
		s(&p)
	}
	return p
}

// minTTL is the shortest TTL, to the millisecond, with which settings (and
// the defaults that scale with the TTL) are safe; 0 if none up to a day is.
func minTTL(settings []Setting) time.Duration {
	ok := func(ttl time.Duration) bool { return policyFor(ttl, settings).Validate() == nil }
	hi := time.Millisecond
	for !ok(hi) {
		if hi *= 2; hi > 24*time.Hour {
			return 0
		}
	}
	lo := hi / 2
	for hi-lo > time.Millisecond {
		if mid := (lo + hi) / 2; ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi.Round(time.Millisecond)
}

// errTooTight is the error of timings that leave no time to renew.
var errTooTight = errors.New("no time left to renew")

// Validate reports why p cannot be kept safely, or nil. A policy is safe
// when a renewal sent one interval after the last one, and answered within
// the headroom, still comes before SIGTERM is due:
// Interval + Grace + Margin + headroom < TTL·(1−Drift).
func (p Policy) Validate() error {
	switch {
	case p.TTL <= 0:
		return fmt.Errorf("ttl %v must be positive", p.TTL)
	case p.TTL > MaxTTL:
		return fmt.Errorf("ttl %v is too long: use at most %v", p.TTL, MaxTTL)
	case p.Interval < MinInterval:
		return fmt.Errorf("heartbeat %v is too short: use at least %v", p.Interval, MinInterval)
	case p.Grace < 0:
		return fmt.Errorf("kill grace %v must not be negative", p.Grace)
	case p.Drift < 0 || p.Drift >= 0.5:
		return fmt.Errorf("drift %v must be in [0, 0.5)", p.Drift)
	}
	if need := p.Interval + p.Grace + p.Margin + p.headroom(); need >= p.life() {
		return fmt.Errorf("%w: heartbeat %v + kill grace %v + safety margin %v + %v for a round trip exceed ttl %v less %.0f%% clock drift (%v)",
			errTooTight, ms(p.Interval), ms(p.Grace), ms(p.Margin), ms(p.headroom()), p.TTL, p.Drift*100, ms(p.life()))
	}
	return nil
}

// ms rounds d for a message.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// headroom is the time a round trip to the backend may take without
// costing a renewal: a tenth of the heartbeat, at least 10ms.
func (p Policy) headroom() time.Duration { return max(p.Interval/10, 10*time.Millisecond) }

// life is how long after a renewal was sent the lease is surely still held.
func (p Policy) life() time.Duration {
	return p.TTL - time.Duration(float64(p.TTL)*p.Drift)
}

// Deadline is the local deadline D for a lease last renewed at sent.
func (p Policy) Deadline(sent time.Time) time.Time { return sent.Add(p.life()) }

// StartSlack is how long after its request was sent a lease can still
// start a command with at least one heartbeat left before its term
// deadline: the age at which a grant is too late to use.
func (p Policy) StartSlack() time.Duration { return p.life() - p.Margin - p.Grace - p.Interval }

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
