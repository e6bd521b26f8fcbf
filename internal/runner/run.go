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
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/heartbeat"
)

// Locker is the part of a backend that the runner uses.
type Locker interface {
	Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error)
}

// Job is one command to run under one lock.
type Job struct {
	Key     string
	Locker  Locker
	Lease   backend.AcquireOptions // TTL, holder, run id, wait
	Policy  heartbeat.Policy
	Timeout time.Duration // longest wait for the lock; 0 is no limit
	Busy    int           // exit code when the lock is held; the CLI's default is ExitBusy
	Backend string        // the backend URL given to the child, already redacted

	Path     string      // the resolved command, see Resolve
	Args     []string    // argv, Args[0] the name as given
	Stdio    [3]*os.File // the command's stdin, stdout, stderr
	Watchdog []string    // argv of a watchdog process (see Watch), to which the command's cgroup is appended; none if empty
	Log      *slog.Logger

	FailOpen bool   // run without the lock when the backend cannot be reached (see FailOpenable)
	Stats    *Stats // filled in with the run's figures; may be nil
}

// Run runs the job and returns nil when the command exited 0, or an
// *ExitError with the status lockrun should exit with.
func Run(ctx context.Context, job Job) error {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	if err := becomeSubreaper(); err != nil {
		return startError(job.Args[0], err)
	}
	// A waiter readies the command's guards while it waits, off the
	// hand-off path; a run that may find the lock busy does not pay for
	// them before it knows.
	var proc *process
	if job.Lease.Wait {
		proc = prepare(job.Watchdog)
	}
	asked := time.Now()
	lease, err := acquire(ctx, job, sigs)
	job.Stats.waited(time.Since(asked))
	if err != nil && job.FailOpen && FailOpenable(err) {
		return runUnlocked(ctx, job, proc, sigs, err)
	}
	if err != nil {
		if proc != nil {
			proc.abandon()
		}
		return err
	}
	if proc == nil {
		proc = prepare(job.Watchdog)
	}
	log := job.Log.With("token", lease.Token().String())
	log.Debug("lock acquired", "event", EventAcquired, "ttl", lease.TTL(), "took", time.Since(lease.Start()).Round(time.Microsecond))

	began := time.Now()
	status, lost, cause, err := runCommand(ctx, job, proc, lease, sigs, log)
	if err == nil {
		job.Stats.ran(time.Since(began), lost)
		log.Debug("command exited", "event", EventExited, "status", status, "lost", lost)
	}
	release(job, lease, lost, log)
	<-proc.reaped // the watchdog and the cgroup go after the lock, off the hand-off path
	switch {
	case err != nil:
		return err
	case lost:
		return &ExitError{Code: ExitLost, Err: fmt.Errorf("lock %q: %w; the command was stopped", job.Key, cause)}
	case status != 0:
		return &ExitError{Code: status}
	}
	return nil
}

// runCommand starts the command in proc, keeps the lease alive while it
// runs, and supervises it to its end. It never starts a command without a
// live lease.
func runCommand(ctx context.Context, job Job, proc *process, lease backend.Lease, sigs <-chan os.Signal, log *slog.Logger) (status int, lost bool, cause, err error) {
	p := job.Policy
	if !time.Now().Before(p.TermAt(lease.Start())) {
		proc.abandon()
		return 0, false, nil, &ExitError{Code: ExitUnavailable, Err: fmt.Errorf(
			"lock %q was granted too late to run the command under a %v lease: %w", job.Key, p.TTL, backend.ErrUnavailable)}
	}
	env := childEnv(os.Environ(), map[string]string{
		"LOCKRUN_FENCING_TOKEN": lease.Token().String(),
		"LOCKRUN_KEY":           job.Key,
		"LOCKRUN_HOLDER":        job.Lease.Holder,
		"LOCKRUN_RUN_ID":        job.Lease.RunID,
		"LOCKRUN_TTL":           p.TTL.String(),
		"LOCKRUN_BACKEND":       job.Backend,
	})
	// The watchdog kills halfway between lockrun's own SIGKILL and the
	// local deadline: a backstop that never pre-empts lockrun.
	backstop := p.Margin / 2
	err = proc.start(spec{
		path: job.Path, argv: job.Args, env: env, files: append(job.Stdio[:], lockFiles(lease)...),
		killAt: p.KillAt(lease.Start()).Add(backstop),
	})
	if err != nil {
		return 0, false, nil, startError(job.Args[0], err)
	}
	if proc.wdErr != nil {
		log.Warn("running without a watchdog", "err", proc.wdErr)
	}
	keeper := heartbeat.Start(ctx, lease, p, lease.Start(), heartbeat.WithLogger(log),
		heartbeat.OnExtend(func(killAt time.Time) { proc.arm(killAt.Add(backstop)) }))
	defer keeper.Stop()
	s := &supervisor{p: proc, loss: keeper, sigs: sigs, grace: p.Grace, backstop: backstop, log: log}
	ws, lost := s.wait()
	s.cleanup(lost)
	cause = keeper.Err()
	if lost && cause == nil {
		cause = fmt.Errorf("%w: the lease outlived its kill deadline (was lockrun frozen?)", backend.ErrLost)
	}
	return statusCode(ws), lost, cause, nil
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
func release(job Job, lease backend.Lease, lost bool, log *slog.Logger) {
	// A lost lease is given back on a short deadline: the backend is likely
	// unreachable, and the lease expires by itself anyway.
	limit := min(job.Policy.TTL, 10*time.Second)
	if lost {
		limit = min(job.Policy.TTL/4, time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	err := lease.Release(ctx)
	switch {
	case err == nil:
		log.Debug("lock released", "event", EventReleased)
	case errors.Is(err, backend.ErrLost) && lost:
	case errors.Is(err, backend.ErrLost):
		log.Warn("lock was lost by the time the command ended", "err", err)
	default:
		log.Warn("could not release the lock; it expires by itself", "ttl", lease.TTL(), "err", err)
	}
}

// signalStatus is the exit code for a run interrupted by sig before the
// command started, as if the command had died of it.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return ExitSoftware
}
