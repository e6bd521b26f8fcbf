package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/clock"
)

// FailOpenable reports whether err, from opening the backend or from
// taking the lock, lets a --fail-open job run without the lock: the
// backend could not be reached (it wraps backend.ErrUnavailable), or its
// grant came too late to use. A busy lock, a timeout, a refused
// credential, a misconfigured backend, a bad URL or key and a signal while
// waiting never qualify: fail-open is about outages, never about
// contention or mistakes.
func FailOpenable(err error) bool {
	var exit *ExitError
	if errors.As(err, &exit) {
		return false // a signal while waiting: the user's, not an outage
	}
	for _, never := range []error{backend.ErrHeld, backend.ErrLost, backend.ErrPermission, backend.ErrConfig,
		backend.ErrInvalidURL, backend.ErrInvalidKey, backend.ErrInvalidOptions} {
		if errors.Is(err, never) {
			return false
		}
	}
	return errors.Is(err, backend.ErrUnavailable)
}

// noDeadline stands for "never" on the deadlines' clock: far enough to
// never come, near enough not to overflow the watchdog's int64
// nanoseconds.
const noDeadline = 100 * 365 * 24 * time.Hour

// RunUnlocked runs the job's command without a lock, because cause (see
// FailOpenable) kept lockrun from reaching the backend and the job allows
// it. The command gets an empty LOCKRUN_FENCING_TOKEN and
// LOCKRUN_FAIL_OPEN=1 and the guards of a locked run: process group,
// cgroup, subreaper, signal forwarding, and a watchdog that kills its tree
// if lockrun dies, without which it does not start. With no lease there is
// no lease deadline; --max-run is kept by lockrun and by the watchdog.
// Errors are Run's, but for the lock's own.
func RunUnlocked(ctx context.Context, job Job, cause error) error {
	if job.Clock == nil {
		job.Clock = clock.Boot
	}
	sigs := catchSignals()
	defer sigs.stop()
	if err := becomeSubreaper(); err != nil {
		return err
	}
	sigs.wait()
	return runUnlocked(ctx, job, nil, sigs.c, cause)
}

// runUnlocked is RunUnlocked once signals are caught; proc is what was
// prepared while waiting for the lock, if anything.
func runUnlocked(_ context.Context, job Job, proc *process, sigs <-chan os.Signal, cause error) error {
	if proc == nil {
		proc = prepare(job.Watchdog, job.Clock, false, nil)
	}
	proc.answer() // the backend's: unreachable
	job.Stats.failOpen()
	job.Log.Error("FAIL-OPEN: the backend cannot be reached; running the command WITHOUT the lock",
		"event", EventFailOpen, "err", cause)
	status, why, err := superviseUnlocked(job, proc, sigs)
	<-proc.reaped
	return outcome(status, why, err, fmt.Sprintf("command run without lock %q", job.Key))
}

// superviseUnlocked starts the command in proc with no lease and
// supervises it to the end of its tree, as runCommand does under a lock.
func superviseUnlocked(job Job, proc *process, sigs <-chan os.Signal) (status int, why, err error) {
	p := job.Policy
	env := childEnv(os.Environ(), map[string]string{
		"LOCKRUN_FENCING_TOKEN": "",
		"LOCKRUN_FAIL_OPEN":     "1",
		"LOCKRUN_KEY":           job.Key,
		"LOCKRUN_HOLDER":        job.Acquire.Holder,
		"LOCKRUN_RUN_ID":        job.Acquire.RunID,
		"LOCKRUN_TTL":           p.TTL.String(),
		"LOCKRUN_BACKEND":       job.BackendURL,
	})
	backstop := p.Margin / 2
	now := job.Clock.Now()
	never := now.Add(noDeadline)
	// The watchdog's own deadlines are --max-run's, so that a lockrun
	// frozen past --max-run cannot let the command run on: its term
	// deadline (what the watchdog holds until lockrun says the command
	// started: a lockrun frozen between the exec and that word is stopped
	// with its command) and its SIGKILL with the backstop; counted from
	// before the start here, and re-armed after it.
	termAt, killAt := never, never
	if job.MaxRun > 0 {
		termAt, killAt = now.Add(job.MaxRun), now.Add(job.MaxRun+p.Grace+backstop)
	}
	err = proc.start(spec{path: job.Path, argv: job.Args, env: env, files: job.Stdio[:], termAt: termAt, killAt: killAt})
	if err != nil {
		return 0, nil, notStarted(job, err)
	}
	started := job.Clock.Now()
	s := &supervisor{p: proc, loss: noLease{never}, clock: job.Clock, sigs: sigs, grace: p.Grace, backstop: backstop, log: job.Log}
	if job.MaxRun > 0 {
		s.maxRunAt = started.Add(job.MaxRun)
		proc.arm(s.maxRunAt.Add(p.Grace + backstop)) // from the real start: never before lockrun's own SIGKILL
	}
	reportContainment(proc, job.Log) // after the start: a log line must not delay it
	ws, why := s.wait()
	s.cleanup()
	status = statusCode(ws)
	job.Stats.ran(job.Clock.Now().Sub(started), false)
	job.Log.Debug("command exited", "event", EventExited, "status", status, "fail_open", true)
	return status, why, nil
}

// noLease is the loss of a run that holds no lock: there is nothing to
// lose, so no kill deadline but the far one it names.
type noLease struct{ never time.Time }

func (noLease) Lost() <-chan struct{} { return nil }
func (n noLease) KillBy() time.Time   { return n.never }
func (noLease) Err() error            { return nil }
