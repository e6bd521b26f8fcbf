package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/runner"
)

// announcer is the backend as the runner sees it, telling people about
// waits: a waiting run says once whom it waits for, then, on a terminal,
// keeps a live line with the time waited, or elsewhere says it still waits
// at growing intervals (see nextNotice); a timeout names the holder; with
// -v, the grant says how long it waited and the end how long the command
// ran and how it exited.
type announcer struct {
	b      backend.Backend
	log    *slog.Logger
	fields bool      // JSON: the holder in fields too, not only in the text
	live   io.Writer // a terminal for the live line, or nil

	mu        sync.Mutex
	holder    backend.Status // the holder last seen while waiting
	waitedOut bool           // a wait ended without the lock
	granted   time.Time
}

func (st *state) announcer(b backend.Backend, log *slog.Logger) *announcer {
	a := &announcer{b: b, log: log, fields: st.json}
	if !st.quiet && !st.sink && !st.json && isTerminal(st.stderr) {
		a.live = st.stderr
	}
	return a
}

// Unwrap is the backend behind the announcer, for the command's control
// requests (see runner.Job.Locker).
func (a *announcer) Unwrap() backend.Backend { return a.b }

// Acquire takes the lock as b would. A waiting run first tries without
// waiting, which is how it learns whom it waits for; only then does it
// queue.
func (a *announcer) Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	try := o
	try.Wait = false
	l, err := a.b.Acquire(ctx, key, try)
	var held *backend.HeldError
	if !o.Wait || !errors.As(err, &held) {
		a.grant(l)
		return l, err
	}
	a.seen(held.Status, false)
	began := time.Now()
	var fields []any
	if a.fields {
		fields = heldFields(held.Status)
	}
	a.log.Log(ctx, levelNotice, fmt.Sprintf("waiting for lock %q, held by %s", key, heldBy(held.Status, began)), fields...)
	stop := a.progress(key, began)
	l, err = a.b.Acquire(ctx, key, o)
	stop()
	if err != nil {
		a.lookAgain(ctx, key)
		return nil, err
	}
	a.grant(l)
	a.log.Debug("lock granted after waiting", "waited", time.Since(began))
	return l, nil
}

// heldFields are a JSON log's fields for who holds a lock: what the
// backend knows of them, and nothing it does not (no empty holder, no
// token 0, which no holder has).
func heldFields(st backend.Status) []any {
	var fields []any
	if st.Limit > 1 {
		fields = append(fields, "holders", len(st.Holders), "limit", st.Limit)
	}
	if st.Holder != "" {
		fields = append(fields, "holder", st.Holder)
	}
	if st.Token != 0 {
		fields = append(fields, "token", st.Token.String())
	}
	return fields
}

func (a *announcer) grant(l backend.Lease) {
	if l == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.granted = time.Now()
}

func (a *announcer) seen(st backend.Status, out bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st.Held {
		a.holder = st
	}
	a.waitedOut = a.waitedOut || out
}

// lookAgain notes who holds key once a wait ended without it (a timeout, a
// signal), so that the error can name them.
func (a *announcer) lookAgain(ctx context.Context, key string) {
	if ctx.Err() == nil {
		return
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	st, err := a.b.Inspect(ictx, key)
	if err != nil {
		st = backend.Status{}
	}
	a.seen(st, true)
}

// nextNotice is the time waited at which a waiter off a terminal next says
// it still waits, after the one at prev (0: the first): 30s, 1m, 2m, 4m
// and so on, then hourly.
func nextNotice(prev time.Duration) time.Duration {
	if prev == 0 {
		return 30 * time.Second
	}
	return min(2*prev, prev+time.Hour)
}

// progress shows the wait going on until stop is called.
func (a *announcer) progress(key string, began time.Time) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		if a.live != nil {
			a.liveLine(key, began, done)
		} else {
			a.notices(key, began, done)
		}
	}()
	return func() { close(done); <-finished }
}

func (a *announcer) liveLine(key string, began time.Time, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			fmt.Fprint(a.live, "\r\x1b[K")
			return
		case now := <-t.C:
			fmt.Fprintf(a.live, "\rlockrun: waiting for lock %q: %s\x1b[K", key, now.Sub(began).Round(time.Second))
		}
	}
}

func (a *announcer) notices(key string, began time.Time, done <-chan struct{}) {
	for at := nextNotice(0); ; at = nextNotice(at) {
		t := time.NewTimer(time.Until(began.Add(at)))
		select {
		case <-done:
			t.Stop()
			return
		case <-t.C:
			a.log.Log(context.Background(), levelNotice, fmt.Sprintf("still waiting for lock %q after %v", key, at))
		}
	}
}

// ended is the run's error, with the holder named when a wait timed out;
// with -v it says how long the command ran and how it ended.
func (a *announcer) ended(err error) error {
	a.mu.Lock()
	h, out, granted := a.holder, a.waitedOut, a.granted
	a.mu.Unlock()
	if out && h.Held && errors.Is(err, backend.ErrHeld) {
		return fmt.Errorf("%w; held by %s", err, heldBy(h, time.Now()))
	}
	if !granted.IsZero() {
		a.log.Debug("command ended", "ran", time.Since(granted), "exit_code", exitCode(err), "how", howEnded(err))
	}
	return err
}

// howEnded says in words how a run that got the lock ended.
func howEnded(err error) string {
	var exit *runner.ExitError
	switch {
	case err == nil:
		return "exited 0"
	case errors.As(err, &exit) && exit.Err == nil && exit.Code > 128:
		return fmt.Sprintf("killed by signal %d", exit.Code-128)
	case errors.As(err, &exit) && exit.Err == nil:
		return fmt.Sprintf("exited %d", exit.Code)
	}
	return err.Error()
}
