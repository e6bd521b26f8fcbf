// Package memory is an in-process backend with fault injection, for unit
// tests of the runner and the heartbeat. It keeps the contract (it passes
// backendtest) but shares nothing between processes: never use it to lock.
package memory

import (
	"context"
	"fmt"
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

type entry struct {
	holder, runID string
	token         backend.Token
	expires       time.Time // zero when free
}

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

func (b *Backend) entry(key string) *entry {
	e := b.locks[key]
	if e == nil {
		e = &entry{}
		b.locks[key] = e
	}
	if !e.expires.IsZero() && !time.Now().Before(e.expires) {
		e.expires, e.holder, e.runID = time.Time{}, "", ""
	}
	return e
}

// notify wakes waiters; callers hold b.mu.
func (b *Backend) notify() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// Acquire takes key, or waits for a release or the holder's expiry.
func (b *Backend) Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	if err := backend.ValidateRequest(key, o); err != nil {
		return nil, err
	}
	for {
		start := time.Now()
		b.mu.Lock()
		e := b.entry(key)
		if e.expires.IsZero() {
			// As every backend: above the last token, and never below
			// the wall clock in microseconds.
			e.holder, e.runID, e.token = o.Holder, o.RunID, max(e.token+1, backend.ClockToken(start))
			e.expires = start.Add(o.TTL)
			b.notify()
			b.mu.Unlock()
			return &lease{b: b, key: key, runID: o.RunID, token: e.token, ttl: o.TTL, start: start}, nil
		}
		held := &backend.HeldError{Status: b.statusLocked(key, e)}
		changed, left := b.changed, time.Until(e.expires)
		b.mu.Unlock()
		if !o.Wait {
			return nil, held
		}
		select {
		case <-changed:
		case <-time.After(left):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// Inspect reports the holder of key.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Status, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Status{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.statusLocked(key, b.entry(key)), nil
}

func (b *Backend) statusLocked(key string, e *entry) backend.Status {
	st := backend.Status{Key: key, Token: e.token}
	if !e.expires.IsZero() {
		st.Held, st.Holder, st.RunID, st.TTL = true, e.holder, e.runID, time.Until(e.expires)
	}
	return st
}

// ForceRelease frees key whoever holds it.
func (b *Backend) ForceRelease(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(key)
	e.expires, e.holder, e.runID = time.Time{}, "", ""
	b.notify()
	return nil
}

// Expire ends key's lease at once, as if its holder had stopped renewing
// a TTL ago.
func (b *Backend) Expire(key string) { _ = b.ForceRelease(context.Background(), key) }

type lease struct {
	b          *Backend
	key, runID string
	token      backend.Token
	ttl        time.Duration
	start      time.Time
}

func (l *lease) Token() backend.Token { return l.token }
func (l *lease) TTL() time.Duration   { return l.ttl }
func (l *lease) Start() time.Time     { return l.start }

// owned returns the entry if this lease still holds it; callers hold b.mu.
func (l *lease) owned() (*entry, error) {
	e := l.b.entry(l.key)
	if e.expires.IsZero() || e.runID != l.runID || e.token != l.token {
		return nil, fmt.Errorf("%w: key %q", backend.ErrLost, l.key)
	}
	return e, nil
}

func (l *lease) Renew(ctx context.Context) error {
	l.b.mu.Lock()
	f := l.b.renewFn
	l.b.mu.Unlock()
	if f != nil {
		return f(ctx)
	}
	start := time.Now()
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	e, err := l.owned()
	if err != nil {
		return err
	}
	e.expires = start.Add(l.ttl)
	return nil
}

func (l *lease) Release(ctx context.Context) error {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	e, err := l.owned()
	if err != nil {
		return err
	}
	e.expires, e.holder, e.runID = time.Time{}, "", ""
	l.b.notify()
	return nil
}
