package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/clock"
)

// Renewer is the part of a lease the heartbeat needs.
type Renewer interface {
	Renew(ctx context.Context) error
}

// errStopped ends a renewal that Stop interrupted.
var errStopped = errors.New("heartbeat stopped")

// Keeper renews one lease on a heartbeat until Stop, and reports the lease
// lost, once, when a renewal says so or when the lease could be about to
// expire without a successful renewal.
type Keeper struct {
	lease  Renewer
	policy Policy
	clock  clock.Clock
	log    *slog.Logger
	onLive func(killAt time.Time)

	lost     chan struct{}
	stop     chan struct{}
	stopOnce sync.Once
	inflight sync.WaitGroup

	mu       sync.Mutex
	killAt   time.Time // the current kill deadline; final once lost is closed
	cause    error
	stopped  bool // Stop has begun: no renewal starts
	renewing int  // renewals in flight
}

// Option changes how a Keeper works.
type Option func(*Keeper)

// WithLogger makes the keeper log renewals (debug) and failures (warn).
func WithLogger(l *slog.Logger) Option { return func(k *Keeper) { k.log = l } }

// WithClock keeps the keeper's deadlines on c (default clock.Boot, which
// counts suspend); sent, given to Start, must be a time on c.
func WithClock(c clock.Clock) Option { return func(k *Keeper) { k.clock = c } }

// OnExtend calls f with the new kill deadline after the acquisition and
// after every successful renewal, from the keeper's goroutine, never once
// Stop has returned; f must not block, nor call the Keeper. It lets a
// watchdog outside this process hold the deadline.
func OnExtend(f func(killAt time.Time)) Option { return func(k *Keeper) { k.onLive = f } }

// Start begins renewing lease, acquired by a request sent at sent (on the
// keeper's clock, see WithClock), under policy p. Renewal calls use ctx for values only: they end by the kill
// deadline whatever ctx does, and the keeper runs until Stop.
func Start(ctx context.Context, lease Renewer, p Policy, sent time.Time, opts ...Option) *Keeper {
	k := &Keeper{
		lease:  lease,
		policy: p,
		clock:  clock.Boot,
		log:    slog.New(slog.DiscardHandler),
		lost:   make(chan struct{}),
		stop:   make(chan struct{}),
		killAt: p.KillAt(sent),
	}
	for _, o := range opts {
		o(k)
	}
	go k.loop(context.WithoutCancel(ctx), sent)
	return k
}

// Lost is closed when the lease must be treated as lost: the holder should
// be told to stop now and be dead by KillBy.
func (k *Keeper) Lost() <-chan struct{} { return k.lost }

// KillBy is the time by which the holder must be dead if the lease is lost:
// the current local deadline less the margin.
func (k *Keeper) KillBy() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.killAt
}

// Err says why the lease was lost (it wraps backend.ErrLost), or nil.
func (k *Keeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cause
}

// stopWait bounds how long Stop waits for a renewal to heed its cancelled
// context: the release that follows Stop must not hang on a backend call.
const stopWait = time.Second

// Stop ends the renewals and waits until none is in flight, a second at
// most. No renewal starts once it has begun; it does not wait for the
// keeper's goroutine, which ends on its own (a release that follows need
// not wait for that goroutine to be woken). It is safe to call more than
// once and after a loss.
func (k *Keeper) Stop() {
	k.mu.Lock()
	k.stopped = true
	busy := k.renewing > 0
	k.mu.Unlock()
	k.stopOnce.Do(func() { close(k.stop) })
	if !busy {
		return
	}
	idle := make(chan struct{})
	go func() {
		k.inflight.Wait()
		close(idle)
	}()
	t := time.NewTimer(stopWait)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
		k.log.Warn("a renewal ignored its cancellation; releasing all the same", "waited", stopWait)
	}
}

func (k *Keeper) loop(ctx context.Context, sent time.Time) {
	p := k.policy
	k.extended(sent)
	next := sent.Add(p.Interval)
	var lastErr error
	wake := doneOf(k.lease)
	for {
		termAt := p.TermAt(sent)
		now := k.clock.Now()
		if !now.Before(termAt) {
			k.lose(expired(lastErr), p.KillAt(sent))
			return
		}
		if now.Before(next) {
			ok, woken := k.sleep(minTime(next, termAt), wake)
			if !ok {
				return
			}
			if woken { // the lease says it is lost: renew now to learn why
				wake, next = nil, k.clock.Now()
			}
			continue // re-check the deadline before renewing
		}
		s := k.clock.Now()
		err := k.renew(ctx, termAt)
		switch {
		case err == nil:
			sent, lastErr = s, nil
			next = s.Add(p.Interval)
			if !k.extended(s) {
				return // stopped as the renewal came back
			}
			k.log.Debug("lease renewed", "event", "renewed", "took", k.clock.Now().Sub(s).Round(time.Microsecond), "kill_by", p.KillAt(s).Sub(k.clock.Now()).Round(time.Millisecond))
		case errors.Is(err, errStopped) || k.isStopped():
			return // nothing to report of a lease being released
		case errors.Is(err, backend.ErrLost):
			k.lose(err, minTime(k.clock.Now().Add(p.Grace), p.KillAt(sent)))
			return
		default:
			lastErr = err
			next = k.clock.Now().Add(p.retryAfter())
			k.log.Warn("lease renewal failed; retrying", "event", "renewal_failed", "err", err, "term_in", termAt.Sub(k.clock.Now()).Round(time.Millisecond))
		}
	}
}

// renew runs one renewal that cannot hold the loop past termAt or Stop,
// even if the lease ignores its context: the loop stops waiting for it.
// (Stop then waits for it to return, which a lease that honours its
// context does at once.)
func (k *Keeper) renew(ctx context.Context, termAt time.Time) error {
	// A context's deadline is on Go's clock, which a suspend holds back;
	// the wait below is on the keeper's, and cancels it.
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return errStopped
	}
	k.renewing++
	k.inflight.Add(1)
	k.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, termAt.Sub(k.clock.Now()))
	res := make(chan error, 1)
	go func() {
		defer k.renewed()
		defer cancel()
		res <- k.lease.Renew(rctx)
	}()
	due, stop := k.clock.At(termAt)
	defer stop()
	select {
	case err := <-res:
		return err
	case <-due:
		cancel()
		return fmt.Errorf("renewal still unanswered at the term deadline: %w", context.DeadlineExceeded)
	case <-k.stop:
		cancel()
		return errStopped
	}
}

func (k *Keeper) isStopped() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stopped
}

// renewed ends a renewal's count in flight.
func (k *Keeper) renewed() {
	k.mu.Lock()
	k.renewing--
	k.mu.Unlock()
	k.inflight.Done()
}

// sleep waits until at on the keeper's clock, or until wake fires; ok is
// false when Stop came first, woken true when wake did.
func (k *Keeper) sleep(at time.Time, wake <-chan struct{}) (ok, woken bool) {
	due, stop := k.clock.At(at)
	defer stop()
	select {
	case <-k.stop:
		return false, false
	case <-due:
		return true, false
	case <-wake:
		return true, true
	}
}

// extended moves the kill deadline to the one of a renewal sent at sent,
// and tells onLive, unless Stop has begun: it reports whether it did.
// onLive is called under mu, so that none runs once Stop has returned.
func (k *Keeper) extended(sent time.Time) bool {
	killAt := k.policy.KillAt(sent)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return false
	}
	k.killAt = killAt
	if k.onLive != nil {
		k.onLive(killAt)
	}
	return true
}

func (k *Keeper) lose(cause error, killBy time.Time) {
	k.mu.Lock()
	k.cause, k.killAt = cause, killBy
	k.mu.Unlock()
	close(k.lost)
}

// expired explains a lease that reached its term deadline unrenewed.
func expired(lastErr error) error {
	if lastErr == nil {
		return fmt.Errorf("%w: the lease reached its deadline before a renewal could be sent (was lockrun paused?)", backend.ErrLost)
	}
	return fmt.Errorf("%w: no renewal succeeded within the lease (last error: %v)", backend.ErrLost, lastErr)
}

// doneOf is the lease's Done channel, for a lease that can tell at once
// that it is lost (the file backend's, when its lock file is removed);
// nil, which never fires, for the others.
func doneOf(lease Renewer) <-chan struct{} {
	if d, ok := lease.(interface{ Done() <-chan struct{} }); ok {
		return d.Done()
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
