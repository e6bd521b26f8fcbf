// Package runner runs one command under a lock: it takes the lease, keeps it
// alive with the heartbeat, starts the command with the fencing token in its
// environment, kills everything the command started before the lease can
// expire if ownership is lost, and releases the lock once nothing is left.
// It knows the backend contract only, never a particular backend.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/clock"
	"github.com/lockrun/lockrun/internal/heartbeat"
	"github.com/lockrun/lockrun/internal/watchdog"
)

// Locker is the part of a backend that the runner uses.
type Locker interface {
	Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error)
}

// localLocker is a Locker whose locks live on this machine (the file
// backend): it answers without a round trip, a busy answer at once.
type localLocker interface {
	Local() bool
}

// isLocal tells whether locker, or the backend it wraps, is local.
func isLocal(locker Locker) bool {
	var l any = locker
	if w, ok := l.(wrappedLocker); ok {
		l = w.Unwrap()
	}
	local, ok := l.(localLocker)
	return ok && local.Local()
}

// Job is one command to run under one lock.
type Job struct {
	Key        string
	Locker     Locker
	Acquire    backend.AcquireOptions // what to ask the backend for: TTL, holder, run id, wait
	Policy     heartbeat.Policy
	Timeout    time.Duration // longest wait for the lock; 0 is no limit
	MaxRun     time.Duration // longest run of the command, then it is stopped (ErrMaxRun); 0 is no limit
	BackendURL string        // the backend's URL as the command sees it, already redacted

	Path     string            // the resolved command, see Resolve
	Args     []string          // argv, Args[0] the name as given
	Stdio    [3]*os.File       // the command's stdin, stdout, stderr
	Watchdog *watchdog.Program // the watchdog to guard the command; none if nil
	Clock    clock.Clock       // the deadlines' clock; nil is clock.Boot, which counts suspend
	Log      *slog.Logger

	FailOpen bool   // run without the lock when the backend cannot be reached (see FailOpenable)
	Stats    *Stats // filled in with the run's figures; may be nil
}

// Run runs the job. It returns nil when the command exited 0; an
// *ExitError with the command's status when it failed; otherwise an error
// wrapping what happened: backend.ErrHeld (busy, or timed out),
// backend.ErrLost (the command was stopped), ErrMaxRun, ErrUnguarded,
// ErrNotFound, ErrCannotExec, or the backend's own sentinels.
func Run(ctx context.Context, job Job) error {
	if job.Clock == nil {
		job.Clock = clock.Boot
	}
	sigs := catchSignals()
	defer sigs.stop()

	if err := becomeSubreaper(); err != nil {
		return err
	}
	// A waiter readies the command's guards while it waits, off the
	// hand-off path. A run on a backend on this machine makes the cgroup
	// while it asks, and the watchdog once the lock is taken, beside the
	// write and fdatasync of the grant's record (Granting, which a
	// waiter's watchdog, started already, and a server's backend ignore);
	// a run that asks a server makes both once granted. A run that does
	// not wait so never pays for a watchdog, a Go program's start, when
	// the lock is busy: contenders retrying in a loop would load a host
	// with them.
	var proc *process
	var ctl *control // the command's channel to us: checkpoints, fence checks
	local := isLocal(job.Locker)
	if job.Acquire.Wait || local {
		proc = prepare(job.Watchdog, job.Clock, !job.Acquire.Wait, sigs.ready)
		job.Acquire.Granting = proc.answer
	}
	if job.Acquire.Wait {
		ctl = newControl(job, job.Log)
	}
	// A waiter's lease may count from a restart of its TTL (a renewal
	// while it waited) instead of one at its turn, if that restart is at
	// most a third of an interval old: the first renewal then still comes
	// two thirds of an interval after the turn, the deadlines at most a
	// third of an interval sooner, and the grant is far from too late to
	// use (see fresh; half its slack at most, for tight policies).
	job.Acquire.StartWithin = min(job.Policy.StartSlack()/2, job.Policy.Interval/3)
	if job.Acquire.Wait || !local {
		// Killed by a signal before it is caught, a run gives back what
		// the kernel holds for it (a flock), never a server's lease nor
		// a place in line: those wait out their TTL.
		sigs.wait()
	}
	asked := time.Now() // a reported duration: wall time will do
	g, err := acquire(ctx, job, sigs.c)
	job.Stats.waited(time.Since(asked))
	sigs.wait() // before anything is logged, or started, under the lock
	if err != nil {
		ctl.close()
		if job.FailOpen && FailOpenable(err) {
			return runUnlocked(ctx, job, proc, sigs.c, err)
		}
		if proc != nil {
			proc.abandon()
		}
		return err
	}
	if proc == nil {
		proc = prepare(job.Watchdog, job.Clock, false, nil)
	}
	proc.answer()
	log := job.Log.With("token", g.lease.Token().String())
	if !job.Acquire.Wait {
		ctl = newControl(job, log)
	}
	ctl.serve(g.lease, log)
	log.Debug("lock acquired", "event", EventAcquired, "ttl", g.lease.TTL(), "took", time.Since(g.lease.Start()).Round(time.Microsecond))
	warnSkew(log, g.lease, job.Policy.Margin)

	status, why, err := runCommand(ctx, job, proc, ctl, g, sigs.c, log)
	lost := errors.Is(why, backend.ErrLost)
	if err == nil {
		log.Debug("command exited", "event", EventExited, "status", status, "lost", lost)
	}
	// Only a command that did not start makes runCommand fail: its lease
	// is given back, free at once whatever its minimum hold.
	release(job, g.lease, endOf(err != nil, lost), log)
	ctl.close()
	<-proc.reaped // the watchdog and the cgroup go after the lock, off the hand-off path
	return outcome(status, why, err, fmt.Sprintf("lock %q", job.Key))
}

// outcome is Run's error for a command's end: err when it did not start,
// why it was stopped (named by what) when it was, its status otherwise.
func outcome(status int, why, err error, what string) error {
	switch {
	case err != nil:
		return err
	case why != nil:
		return fmt.Errorf("%s: %w; the command was stopped", what, why)
	case status != 0:
		return &ExitError{Code: status}
	}
	return nil
}

// runCommand starts the command in proc, keeps the lease alive while it
// runs, and supervises it to its end. It returns the command's status and
// why it was stopped, if it was. It never starts a command without a live
// lease, nor after the lease's term deadline.
func runCommand(ctx context.Context, job Job, proc *process, ctl *control, g grant, sigs <-chan os.Signal, log *slog.Logger) (status int, why, err error) {
	p := job.Policy
	defer ctl.stop() // before the release: nothing answers for a released lease
	env := childEnv(os.Environ(), ctl.vars(map[string]string{
		"LOCKRUN_FENCING_TOKEN": g.lease.Token().String(),
		"LOCKRUN_KEY":           job.Key,
		"LOCKRUN_HOLDER":        job.Acquire.Holder,
		"LOCKRUN_RUN_ID":        job.Acquire.RunID,
		"LOCKRUN_TTL":           p.TTL.String(),
		"LOCKRUN_BACKEND":       job.BackendURL,
	}))
	// The watchdog kills halfway between lockrun's own SIGKILL and the
	// local deadline: a backstop that never pre-empts lockrun.
	backstop := p.Margin / 2
	err = proc.start(spec{
		path: job.Path, argv: job.Args, env: env, files: append(job.Stdio[:], lockFiles(g.lease)...),
		termAt: p.TermAt(g.sent), killAt: p.KillAt(g.sent).Add(backstop),
	})
	if err != nil {
		return 0, nil, notStarted(job, err)
	}
	started := job.Clock.Now()
	backend.Started(g.lease)
	reportContainment(proc, log) // after the start: a log line must not delay it
	trim := trimAtFirstRenewal(log)
	keeper := heartbeat.Start(ctx, g.lease, p, g.sent, heartbeat.WithLogger(log), heartbeat.WithClock(job.Clock),
		heartbeat.OnExtend(func(killAt time.Time) {
			proc.arm(killAt.Add(backstop))
			trim()
		}))
	defer keeper.Stop()
	ctl.watch(keeper.Lost())
	s := &supervisor{p: proc, loss: keeper, clock: job.Clock, sigs: sigs, grace: p.Grace, backstop: backstop, log: log}
	if job.MaxRun > 0 {
		s.maxRunAt = started.Add(job.MaxRun)
	}
	ws, why := s.wait()
	s.cleanup()
	job.Stats.ran(job.Clock.Now().Sub(started), errors.Is(why, backend.ErrLost))
	return statusCode(ws), why, nil
}

// notStarted explains why the command did not start.
func notStarted(job Job, err error) error {
	switch {
	case errors.Is(err, errTooLate):
		return fmt.Errorf("lock %q was granted too late to run the command under a %v lease: %w", job.Key, job.Policy.TTL, err)
	case errors.Is(err, errNoWatchdog):
		return fmt.Errorf("lock %q: %w", job.Key, err)
	}
	return startError(job.Args[0], err)
}

// reportContainment says, once, that the command is not contained in a
// cgroup: where lockrun may make one (root) that is a warning; an
// unprivileged user without a delegated cgroup never had one, and is told
// with -v only.
func reportContainment(p *process, log *slog.Logger) {
	if p.cgWhy == nil {
		return
	}
	level := slog.LevelWarn
	if os.Geteuid() != 0 && errors.Is(p.cgWhy, fs.ErrPermission) {
		level = slog.LevelDebug
	}
	log.Log(context.Background(), level, "the command is not contained in a cgroup; processes that leave its group are found by walking /proc", "why", p.cgWhy.Error())
}

// filesLease is a lease held by open files, as a flock is. The command
// inherits them, so that the lock is freed only once lockrun and the
// command have both died, in whatever order.
type filesLease interface {
	Files() []*os.File
}

func lockFiles(lease backend.Lease) []*os.File {
	if f, ok := lease.(filesLease); ok {
		return f.Files()
	}
	return nil
}

// release gives the lock back, with its own deadline since the run's
// context may be over. Failing to release is logged, not fatal: the lease
// expires on its own within its TTL.
func release(job Job, lease backend.Lease, end ending, log *slog.Logger) {
	// A lost lease is given back on a short deadline: the backend is likely
	// unreachable, and the lease expires by itself anyway.
	limit := min(job.Policy.TTL, 10*time.Second)
	if end == endLost {
		limit = min(job.Policy.TTL/4, time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var err error
	if end == endUnused {
		err = backend.GiveBack(ctx, lease)
	} else {
		err = lease.Release(ctx)
	}
	switch {
	case err == nil:
		log.Debug("lock released", "event", EventReleased)
	case errors.Is(err, backend.ErrLost) && end == endLost:
	case errors.Is(err, backend.ErrLost):
		log.Warn("lock was lost by the time the command ended", "err", err)
	default:
		log.Warn("could not release the lock; it expires by itself", "ttl", lease.TTL(), "err", err)
	}
}

// ending is how a run's lease ends.
type ending int

const (
	endRan    ending = iota // the command ran: Release, minimum hold and all
	endLost                 // the lease was lost while the command ran
	endUnused               // the command never started: GiveBack, free at once
)

// endOf is the ending of a run whose command did not start (unused) or
// whose lease was lost.
func endOf(unused, lost bool) ending {
	switch {
	case unused:
		return endUnused
	case lost:
		return endLost
	}
	return endRan
}
