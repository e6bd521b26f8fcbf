package memory

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lockrun/lockrun/backend"
)

type lease struct {
	b     *Backend
	key   string
	s     *slot
	ttl   time.Duration
	start time.Time
}

func (l *lease) Token() backend.Token { return l.s.token }
func (l *lease) TTL() time.Duration   { return l.ttl }
func (l *lease) Start() time.Time     { return l.start }

// owned reports whether this lease still holds its slot; callers hold b.mu.
func (l *lease) owned() error {
	e := l.b.entry(l.key)
	if l.s.released || l.s.revoked || !slices.Contains(e.holders, l.s) {
		return fmt.Errorf("%w: key %q, token %d", backend.ErrLost, l.key, l.s.token)
	}
	return nil
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
	if err := l.owned(); err != nil {
		return err
	}
	l.s.expires, l.s.renewed = start.Add(l.ttl), start
	return nil
}

// Release frees the slot, or keeps it until its minimum hold ends.
func (l *lease) Release(ctx context.Context) error { return l.free(false) }

// GiveBack frees the slot at once, minimum hold or not.
func (l *lease) GiveBack(ctx context.Context) error { return l.free(true) }

func (l *lease) free(now bool) error {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	e := l.b.entry(l.key)
	if l.s.revoked && slices.Contains(e.holders, l.s) { // its command is dead: free it now
		e.holders = slices.DeleteFunc(e.holders, func(s *slot) bool { return s == l.s })
		l.b.notify()
		return fmt.Errorf("%w: key %q, token %d was revoked", backend.ErrLost, l.key, l.s.token)
	}
	if err := l.owned(); err != nil {
		return err
	}
	if !now && time.Now().Before(l.s.minEnd) {
		l.s.released, l.s.expires = true, l.s.minEnd
		return nil
	}
	e.holders = slices.DeleteFunc(e.holders, func(s *slot) bool { return s == l.s })
	l.b.notify()
	return nil
}
