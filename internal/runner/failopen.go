package runner

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// FailOpenable reports whether err, from opening the backend or from
// taking the lock, lets a --fail-open job run without the lock: the
// backend could not be reached (it wraps backend.ErrUnavailable). A busy
// lock, a timeout, a refused credential, a misconfigured backend, a bad
// URL or key and a signal while waiting never qualify: fail-open is about
// outages, never about contention or mistakes.
func FailOpenable(err error) bool {
	var exit *ExitError
	if errors.As(err, &exit) && exit.Code != ExitUnavailable {
		return false // a signal, a timeout, a busy lock
	}
	for _, never := range []error{backend.ErrHeld, backend.ErrLost, backend.ErrPermission, backend.ErrConfig,
		backend.ErrInvalidURL, backend.ErrInvalidKey, backend.ErrInvalidOptions} {
		if errors.Is(err, never) {
			return false
		}
	}
	return errors.Is(err, backend.ErrUnavailable)
}

// noDeadline stands for "never" on the watchdog's clock: far enough to
// never come, near enough not to overflow its nanosecond arithmetic.
const noDeadline = 100 * 365 * 24 * time.Hour

// RunUnlocked runs the job's command without a lock, because cause (see
// FailOpenable) kept lockrun from reaching the backend and the job allows
// it. The command gets an empty LOCKRUN_FENCING_TOKEN and
// LOCKRUN_FAIL_OPEN=1, the same process group, cgroup, subreaper, signal
// forwarding and watchdog as under a lock (the watchdog kills the tree if
// lockrun dies), and lockrun exits with its status.
func RunUnlocked(ctx context.Context, job Job, cause error) error {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	if err := becomeSubreaper(); err != nil {
		return startError(job.Args[0], err)
	}
	return runUnlocked(ctx, job, nil, sigs, cause)
}

// runUnlocked is RunUnlocked once signals are caught; proc is what was
// prepared while waiting for the lock, if anything.
func runUnlocked(_ context.Context, job Job, proc *process, sigs <-chan os.Signal, cause error) error {
	if proc == nil {
		proc = prepare(job.Watchdog)
	}
	job.Stats.failOpen()
	job.Log.Error("FAIL-OPEN: the backend cannot be reached; running the command WITHOUT the lock",
		"event", EventFailOpen, "err", cause)
	env := childEnv(os.Environ(), map[string]string{
		"LOCKRUN_FENCING_TOKEN": "",
		"LOCKRUN_FAIL_OPEN":     "1",
		"LOCKRUN_KEY":           job.Key,
		"LOCKRUN_HOLDER":        job.Lease.Holder,
		"LOCKRUN_RUN_ID":        job.Lease.RunID,
		"LOCKRUN_TTL":           job.Policy.TTL.String(),
		"LOCKRUN_BACKEND":       job.Backend,
	})
	began := time.Now()
	err := proc.start(spec{path: job.Path, argv: job.Args, env: env, files: job.Stdio[:], killAt: began.Add(noDeadline)})
	if err != nil {
		return startError(job.Args[0], err)
	}
	if proc.wdErr != nil {
		job.Log.Warn("running without a watchdog", "err", proc.wdErr)
	}
	s := &supervisor{p: proc, loss: neverLost{}, sigs: sigs, grace: job.Policy.Grace, log: job.Log}
	ws, _ := s.wait()
	s.cleanup(false)
	<-proc.reaped
	status := statusCode(ws)
	job.Stats.ran(time.Since(began), false)
	job.Log.Debug("command exited", "event", EventExited, "status", status, "fail_open", true)
	if status != 0 {
		return &ExitError{Code: status}
	}
	return nil
}

// neverLost is the loss of a run that holds no lock: there is nothing to
// lose, so no deadline to meet.
type neverLost struct{}

func (neverLost) Lost() <-chan struct{} { return nil }
func (neverLost) KillBy() time.Time     { return time.Now().Add(noDeadline) }
