// Package memory is an in-process backend with fault injection, for unit
// tests of the runner and the heartbeat. It keeps the contract (it passes
// backendtest, semaphores included) but shares nothing between processes:
// never use it to lock.
package memory

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// Backend is an in-memory store of leases, safe for concurrent use.
type Backend struct {
	mu      sync.Mutex
	locks   map[string]*entry
	changed chan struct{} // closed and replaced on every release or grant
	renewFn func(ctx context.Context) error
}

// entry is one key: its holders (one for a plain lock, up to limit for a
// semaphore) and its queue of waiters, both in the order they came.
type entry struct {
	token   backend.Token // the last token issued for the key
	limit   int           // the holders' (or, with none, the waiters') limit
	holders []*slot       // oldest token first
	queue   []*waiter     // FIFO
}

// slot is one holder's lease as the store records it.
type slot struct {
	holder, runID  string
	token          backend.Token
	info           backend.HolderInfo
	since, renewed time.Time
	expires        time.Time
	minEnd         time.Time // grant + MinHold
	released       bool      // released within its minimum hold: kept, not owned
	revoked        bool      // revoked: kept until its holder releases or it expires
}

type waiter struct{ limit int }

// New returns an empty store.
func New() *Backend {
	return &Backend{locks: make(map[string]*entry), changed: make(chan struct{})}
}

// FailRenewals makes every later renewal call f instead of renewing; f nil
// restores normal renewals. It simulates a link cut (an error), a hung
// server (block on ctx), or a server that says the lease is gone (ErrLost).
func (b *Backend) FailRenewals(f func(ctx context.Context) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.renewFn = f
}

// Close does nothing.
func (b *Backend) Close() error { return nil }

// entry returns key's entry without its expired holders; callers hold b.mu.
func (b *Backend) entry(key string) *entry {
	e := b.locks[key]
	if e == nil {
		e = &entry{}
		b.locks[key] = e
	}
	now := time.Now()
	n := len(e.holders)
	e.holders = slices.DeleteFunc(e.holders, func(s *slot) bool { return !now.Before(s.expires) })
	if len(e.holders) != n {
		b.notify()
	}
	return e
}

// notify wakes waiters; callers hold b.mu.
func (b *Backend) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// Acquire takes a slot of key, or waits in its queue for a release or a
// holder's expiry.
func (b *Backend) Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	if err := backend.ValidateRequest(key, o); err != nil {
		return nil, err
	}
	limit := o.EffectiveLimit()
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(key)
	if have := e.currentLimit(); have != 0 && have != limit {
		return nil, &backend.LimitError{Key: key, Want: limit, Have: have}
	}
	if s := e.holding(o.RunID); s != nil {
		// A retry of a grant this run already has: the same slot, its
		// TTL restarted, never a second one.
		start := time.Now()
		s.expires, s.renewed = start.Add(o.TTL), start
		return &lease{b: b, key: key, s: s, ttl: o.TTL, start: start}, nil
	}
	w := &waiter{limit: limit}
	e.queue = append(e.queue, w)
	e.limit = limit
	for {
		if l, err := b.tryGrant(key, e, w, o); l != nil || err != nil {
			return l, err
		}
		if !o.Wait {
			e.leave(w)
			return nil, &backend.HeldError{Status: e.status(key)}
		}
		changed, left := b.changed, e.nextExpiry()
		b.mu.Unlock()
		select {
		case <-changed:
		case <-time.After(left):
		case <-ctx.Done():
		}
		b.mu.Lock()
		e = b.entry(key)
		if ctx.Err() != nil {
			e.leave(w)
			b.notify() // the waiters behind w move up
			return nil, context.Cause(ctx)
		}
	}
}

// tryGrant gives w a slot if one is free for it: FIFO, a waiter is served
// only when every waiter ahead of it fits too. Callers hold b.mu.
func (b *Backend) tryGrant(key string, e *entry, w *waiter, o backend.AcquireOptions) (backend.Lease, error) {
	pos := slices.Index(e.queue, w)
	if len(e.holders)+pos >= w.limit {
		return nil, nil
	}
	if e.token == math.MaxUint64 {
		e.leave(w)
		return nil, fmt.Errorf("lock %q: %w", key, backend.ErrTokenRange)
	}
	start := time.Now()
	// As every backend: above the last token, and never below the wall
	// clock in microseconds.
	e.token = max(e.token+1, backend.ClockToken(start))
	s := &slot{
		holder: o.Holder, runID: o.RunID, token: e.token, info: o.Info,
		since: start, renewed: start, expires: start.Add(o.TTL), minEnd: start.Add(o.MinHold),
	}
	e.leave(w)
	e.holders = append(e.holders, s)
	e.limit = w.limit
	b.notify()
	return &lease{b: b, key: key, s: s, ttl: o.TTL, start: start}, nil
}

// currentLimit is the limit of key's holders, or of its waiters when it
// has none; 0 when nobody holds or awaits it.
func (e *entry) currentLimit() int {
	if len(e.holders) == 0 && len(e.queue) == 0 {
		return 0
	}
	return e.limit
}

// holding returns the live, owned slot of run id, if any.
func (e *entry) holding(runID string) *slot {
	for _, s := range e.holders {
		if s.runID == runID && !s.released {
			return s
		}
	}
	return nil
}

func (e *entry) leave(w *waiter) {
	e.queue = slices.DeleteFunc(e.queue, func(x *waiter) bool { return x == w })
}

// nextExpiry is how long until the first holder's lease ends.
func (e *entry) nextExpiry() time.Duration {
	left := time.Hour
	for _, s := range e.holders {
		left = min(left, time.Until(s.expires))
	}
	return max(left, 0)
}
