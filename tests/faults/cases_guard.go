package faults

import (
	"context"
	"os/exec"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/heartbeat"
	"github.com/lockrun/lockrun/internal/lockruntest"
)

// The cases of this file attack lockrun's own guards (issue 11): the
// window between the grant and the exec, the watchdog, and a stderr that
// blocks.

// waitTerm waits, at most within, until the run with token has reported
// a SIGTERM, and returns when the oracle heard of it; false if the run
// ended first, or never got one.
func (a *attack) waitTerm(token uint64, within time.Duration) (time.Time, bool) {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		l, ok := a.fleet.Oracle.lifeOf(token)
		switch {
		case ok && !l.termed.IsZero():
			return l.termed, true
		case ok && !l.end.IsZero():
			return time.Time{}, false
		}
	}
	return time.Time{}, false
}

// hookEnv makes a lockrun built with the testhooks tag stop itself
// (SIGSTOP) at the latest point between the grant and the exec.
const hookEnv = "LOCKRUN_TESTHOOK=freeze-before-exec"

// freezeBeforeExec keeps each lockrun that stopped itself between grant
// and exec stopped past the TTL, then resumes it: its command must never
// start after that, and no command may run unguarded meanwhile.
func freezeBeforeExec(ctx context.Context, a *attack) {
	defer a.thawUntilDone()
	frozen := 0
	for ctx.Err() == nil {
		h, ok := a.selfStopped(ctx)
		if !ok {
			break
		}
		frozen++
		sleep(ctx, a.tg.TTL*3/2)
		full := ctx.Err() == nil
		thawed := time.Now()
		_ = syscall.Kill(h.PID, syscall.SIGCONT)
		if l, ok := a.runOf(h.PID, a.tg.TTL); ok && full {
			a.res.failf("a command started %v after its lockrun was resumed from a %v freeze between grant and exec (ttl %v)",
				l.start.Sub(thawed).Round(time.Millisecond), (a.tg.TTL * 3 / 2), a.tg.TTL)
		}
	}
	if frozen == 0 {
		a.res.failf("no lockrun stopped itself between grant and exec: the binary has no %s hook", hookEnv)
	}
}

// selfStopped waits for a lockrun that stopped itself. Its token may not
// be known yet: lockrun's log lines are written behind its back, and the
// one of the grant may still be queued when it stops.
func (a *attack) selfStopped(ctx context.Context) (Attempt, bool) {
	for ctx.Err() == nil {
		for _, at := range a.fleet.Attempts() {
			if at.Exit == -1 && stoppedState(at.PID) {
				return at, true
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return Attempt{}, false
}

// runOf waits, at most within, for the command of the lockrun with pid to
// start, and returns its run; it stops waiting once that lockrun has ended
// and its log has been read.
func (a *attack) runOf(pid int, within time.Duration) (life, bool) {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		at, _ := a.fleet.attempt(pid)
		if l, ok := a.fleet.Oracle.lifeOf(at.Token); ok && at.Token != 0 {
			return l, true
		}
		if at.Exit != -1 {
			return life{}, false
		}
	}
	return life{}, false
}

// thawUntilDone resumes every stopped lockrun until the fleet has ended,
// so that one that stopped itself as the case ended does not hang it.
func (a *attack) thawUntilDone() {
	for {
		for _, at := range a.fleet.Attempts() {
			if at.Exit == -1 && stoppedState(at.PID) {
				_ = syscall.Kill(at.PID, syscall.SIGCONT)
			}
		}
		select {
		case <-a.fleetDone:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// killWatchdogThenFreeze SIGKILLs the holder's watchdog, then freezes its
// lockrun past the TTL: with its guard gone, lockrun must have replaced
// it (the command dies by the deadline) or stopped the command itself.
func killWatchdogThenFreeze(ctx context.Context, a *attack) {
	for ctx.Err() == nil {
		h, l, err := a.fleet.Holder(ctx)
		if err != nil {
			return
		}
		wd, ok := watchdogOf(h.PID)
		if !ok {
			a.res.failf("lockrun %d runs a command but no watchdog among its children", h.PID)
			return
		}
		_ = syscall.Kill(wd, syscall.SIGKILL)
		sleep(ctx, a.tg.TTL/2) // a heartbeat and more to notice
		if now, _ := a.fleet.Oracle.lifeOf(l.token); ctx.Err() != nil || !now.end.IsZero() {
			continue // the command was stopped: failing closed is allowed
		}
		stopped := time.Now()
		_ = syscall.Kill(h.PID, syscall.SIGSTOP)
		alive := runAliveAt(l, stopped.Add(a.tg.TTL))
		end, _ := a.waitEnd(l.token, a.tg.TTL)
		_ = syscall.Kill(h.PID, syscall.SIGCONT)
		if alive {
			a.res.failf("command of a lockrun frozen after its watchdog was killed %s", a.pastFreeze(h, stopped, end))
		}
	}
}

// releaseUnderBlockedStderr breaks the holder's lock with `lockrun
// release` while lockrun's stderr is a full pipe that nobody reads. The
// command (which survives SIGTERM and reports it) must get SIGTERM and die
// by the kill grace after it, as with a stderr that is read, and lockrun
// must end soon after (two TTLs): no log write may hold up the kill or
// the exit.
func releaseUnderBlockedStderr(ctx context.Context, a *attack) {
	grace, slack := heartbeat.DefaultGrace(a.tg.TTL), heartbeat.Margin(a.tg.TTL)
	for ctx.Err() == nil {
		h, l, err := a.fleet.Holder(ctx)
		if err != nil {
			return
		}
		released := time.Now()
		if out, err := exec.Command(a.fleet.Lockrun, "release", "--backend", a.tg.URL, a.fleet.Key).CombinedOutput(); err != nil {
			a.res.failf("lockrun release: %v: %s", err, out)
			return
		}
		termed, ok := a.waitTerm(l.token, 2*a.tg.TTL)
		late := ok && runAliveAt(l, termed.Add(grace+slack))
		end, died := a.waitEnd(l.token, 2*a.tg.TTL)
		if ctx.Err() != nil {
			h.Unblock()
			return // the fleet's own SIGTERM at the end of the case came in between
		}
		switch {
		case !died:
			a.res.failf("the command lived %v past a forced release", 2*a.tg.TTL)
		case !ok:
			a.res.failf("the command got no SIGTERM and died %v after a forced release (the watchdog's backstop?): the kill path waited for stderr",
				end.Sub(released).Round(time.Millisecond))
		case late:
			a.res.failf("the command was alive %v after its SIGTERM, past the %v grace (seen dead after %v)",
				(grace + slack).Round(time.Millisecond), grace.Round(time.Millisecond), end.Sub(termed).Round(time.Millisecond))
		}
		// lockrun gives its last lines half a second to get out (flushWait),
		// then exits: a hung lockrun is one still there well after that.
		if waitDeath(h.PID, 2*a.tg.TTL); lockruntest.Alive(h.PID) {
			a.res.failf("lockrun %d still ran %v after its command died: it waits for its stderr", h.PID, 2*a.tg.TTL)
		}
		h.Unblock() // let a hung lockrun go, so that the next run can start
	}
}
