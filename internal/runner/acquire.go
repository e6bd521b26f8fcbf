package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/clock"
)

// connectAttempts bounds the retries when the backend is unreachable: a
// blip at start should not fail a cron job, a dead server should fail it
// within a few seconds.
const connectAttempts = 3

// grant is a lease and the time its request was sent, on the job's clock.
type grant struct {
	lease backend.Lease
	sent  time.Time
}

// acquire takes the lease, waiting if the job says so, until the timeout or
// a signal. It refuses a lease that arrived too late to be renewed in time.
func acquire(ctx context.Context, job Job, sigs <-chan os.Signal) (grant, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if job.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, job.Timeout, errTimedOut)
		defer stop()
	}
	stopWatch := watchSignals(sigs, func(sig os.Signal) {
		cancel(&ExitError{Code: signalStatus(sig.(syscall.Signal)), Err: fmt.Errorf("interrupted by %s while waiting for lock %q", signalName(sig), job.Key)})
	})
	defer stopWatch()

	if job.Acquire.Wait {
		job.Log.Debug("waiting for the lock", "event", EventWaiting, "timeout", job.Timeout)
	}
	backoff := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		began, bootBegan := time.Now(), job.Clock.Now()
		lease, err := job.Locker.Acquire(ctx, job.Key, job.Acquire)
		if job.Acquire.Wait && time.Since(began) > waitedLong {
			// The backend answered and this waiter waited: a failure after
			// that is a new blip, not the next of a run of failures. Without
			// --wait a slow failure is still a failure: three at most.
			attempt, backoff = 1, 200*time.Millisecond
		}
		var g grant
		if err == nil {
			g = grant{lease, sentOn(job.Clock, lease.Start(), began, bootBegan)}
			err = fresh(ctx, job, g)
		}
		if err == nil {
			if stopWatch() == nil {
				return g, nil
			}
			giveBack(ctx, lease) // a signal came with the lease
		}
		if cause := context.Cause(ctx); cause != nil {
			return grant{}, acquireError(job, cause)
		}
		if errors.Is(err, backend.ErrUnavailable) && attempt < connectAttempts {
			job.Log.Debug("backend unavailable; retrying", "attempt", attempt, "err", err)
			select {
			case <-time.After(backoff):
				backoff = min(2*backoff, 5*time.Second)
				continue
			case <-ctx.Done():
				return grant{}, acquireError(job, context.Cause(ctx))
			}
		}
		return grant{}, acquireError(job, err)
	}
}

var errTimedOut = errors.New("timed out")

// waitedLong is how long an acquisition must have lasted for its failure
// to count as a new blip rather than the next of a run of failures.
const waitedLong = 5 * time.Second

// fresh refuses a lease whose reply came so late that less than one
// heartbeat is left before the command would have to be stopped: starting
// the command then would only be to kill it.
func fresh(ctx context.Context, job Job, g grant) error {
	now := job.Clock.Now()
	if now.Sub(g.sent) <= job.Policy.StartSlack() {
		return nil
	}
	giveBack(ctx, g.lease)
	return fmt.Errorf("%w: the lock was granted %v after it was asked for, too late to run under a %v lease",
		backend.ErrUnavailable, now.Sub(g.sent).Round(10*time.Microsecond), job.Policy.TTL)
}

// sentOn places start, the lease's request time on Go's clock, on clk:
// as long before clk's now as it is before Go's, and earlier still by any
// suspend during the acquisition (began, bootBegan: the call's start on
// both clocks), which clk counts and Go's clock does not. Earlier is the
// safe side: the deadlines come sooner.
func sentOn(clk clock.Clock, start, began, bootBegan time.Time) time.Time {
	now, bootNow := time.Now(), clk.Now()
	suspended := max(bootNow.Sub(bootBegan)-now.Sub(began), 0)
	return bootNow.Add(-now.Sub(start) - suspended)
}

// acquireError explains an acquisition failure; a timeout wraps
// backend.ErrHeld, as a busy lock does.
func acquireError(job Job, err error) error {
	if errors.Is(err, errTimedOut) {
		return fmt.Errorf("timed out after %v waiting for lock %q: %w", job.Timeout, job.Key, backend.ErrHeld)
	}
	return err
}

// giveBack frees a lease that will not be used at once, minimum hold or
// not (nobody ran the schedule it would keep others out of), even when
// ctx is over.
func giveBack(ctx context.Context, lease backend.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = backend.GiveBack(rctx, lease)
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
