package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// connectAttempts bounds the retries when the backend is unreachable: a
// blip at start should not fail a cron job, a dead server should fail it
// within a few seconds.
const connectAttempts = 3

// acquire takes the lease, waiting if the job says so, until the timeout or
// a signal. It refuses a lease that arrived too late to be renewed in time.
func acquire(ctx context.Context, job Job, sigs <-chan os.Signal) (backend.Lease, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if job.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, job.Timeout, errTimedOut)
		defer stop()
	}
	stopWatch := watchSignals(sigs, func(sig os.Signal) {
		cancel(&ExitError{Code: signalStatus(sig), Err: fmt.Errorf("interrupted by %v while waiting for lock %q", sig, job.Key)})
	})
	defer stopWatch()

	if job.Lease.Wait {
		job.Log.Debug("waiting for the lock", "event", EventWaiting, "timeout", job.Timeout)
	}
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		began := time.Now()
		lease, err := job.Locker.Acquire(ctx, job.Key, job.Lease)
		if job.Lease.Wait && time.Since(began) > waitedLong {
			// The backend answered and this waiter waited: a failure after
			// that is a new blip, not the next of a run of failures. Without
			// --wait a slow failure is still a failure: three at most.
			attempt, backoff = 1, 200*time.Millisecond
		}
		if err == nil {
			err = fresh(ctx, job, lease)
		}
		if err == nil {
			if stopWatch() == nil {
				return lease, nil
			}
			giveBack(ctx, lease) // a signal came with the lease
		}
		if cause := context.Cause(ctx); cause != nil {
			return nil, acquireError(job, cause)
		}
		if errors.Is(err, backend.ErrUnavailable) && attempt < connectAttempts {
			job.Log.Debug("backend unavailable; retrying", "attempt", attempt, "err", err)
			select {
			case <-time.After(backoff):
				backoff = min(2*backoff, 5*time.Second)
				continue
			case <-ctx.Done():
				return nil, acquireError(job, context.Cause(ctx))
			}
		}
		return nil, acquireError(job, err)
	}
}

var errTimedOut = errors.New("timed out")

// waitedLong is how long an acquisition must have lasted for its failure
// to count as a new blip rather than the next of a run of failures.
const waitedLong = 5 * time.Second

// fresh refuses a lease whose reply came so late that less than one
// heartbeat is left before the command would have to be stopped: starting
// the command then would only be to kill it.
func fresh(ctx context.Context, job Job, lease backend.Lease) error {
	left := time.Until(job.Policy.TermAt(lease.Start()))
	if left >= job.Policy.Interval {
		return nil
	}
	giveBack(ctx, lease)
	return fmt.Errorf("%w: the lock was granted %v after it was asked for, too late to run under a %v lease",
		backend.ErrUnavailable, time.Since(lease.Start()).Round(10*time.Microsecond), job.Policy.TTL)
}

// acquireError turns an acquisition failure into lockrun's exit status.
func acquireError(job Job, err error) error {
	var exit *ExitError
	switch {
	case errors.As(err, &exit):
		return exit
	case errors.Is(err, errTimedOut):
		return &ExitError{Code: job.Busy, Err: fmt.Errorf("timed out after %v waiting for lock %q: %w", job.Timeout, job.Key, backend.ErrHeld)}
	case errors.Is(err, backend.ErrHeld):
		return &ExitError{Code: job.Busy, Err: err}
	case errors.Is(err, backend.ErrPermission):
		return &ExitError{Code: 77, Err: err} // EX_NOPERM, as in the CLI's table
	case errors.Is(err, backend.ErrUnavailable):
		return &ExitError{Code: ExitUnavailable, Err: err}
	case errors.Is(err, backend.ErrInvalidKey):
		return &ExitError{Code: ExitUsage, Err: err}
	}
	return &ExitError{Code: ExitSoftware, Err: err}
}

// giveBack releases a lease that will not be used, even when ctx is over.
func giveBack(ctx context.Context, lease backend.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = lease.Release(rctx)
}

// watchSignals calls onSignal for the first signal from sigs, until the
// returned stop is called; stop reports that signal, or nil, so that a
// signal caught as the lock was granted is not lost.
func watchSignals(sigs <-chan os.Signal, onSignal func(os.Signal)) (stop func() os.Signal) {
	done := make(chan struct{})
	caught := make(chan os.Signal, 1)
	go func() {
		defer close(caught)
		select {
		case sig := <-sigs:
			onSignal(sig)
			caught <- sig
		case <-done:
		}
	}()
	var once sync.Once
	var sig os.Signal
	return func() os.Signal {
		once.Do(func() {
			close(done)
			sig = <-caught
		})
		return sig
	}
}
