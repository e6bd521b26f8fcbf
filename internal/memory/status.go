package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// Inspect reports the holders of key.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Status, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Status{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.entry(key).status(key), nil
}

// List reports every held key that starts with prefix, sorted by key.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Status, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []backend.Status
	for key := range b.locks {
		if st := b.entry(key).status(key); st.Held && strings.HasPrefix(key, prefix) {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b backend.Status) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// status describes e as the contract says: the holders oldest token
// first, the top-level fields repeating the first. Callers hold b.mu.
func (e *entry) status(key string) backend.Status {
	if len(e.holders) == 0 {
		return backend.Status{Key: key, Token: e.token}
	}
	var all []backend.Status
	for _, s := range e.holders {
		all = append(all, backend.Status{
			Key: key, Held: true, Holder: s.holder, RunID: s.runID, Token: s.token,
			TTL: time.Until(s.expires), Since: s.since, Renewed: s.renewed, Info: s.info, Revoked: s.revoked,
		})
	}
	st := all[0]
	if e.limit > 1 {
		st.Limit, st.Holders = e.limit, all
	}
	return st
}

// ForceRelease frees key whoever holds it, every holder of a semaphore.
func (b *Backend) ForceRelease(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(key)
	e.holders = nil
	b.notify()
	return nil
}

// ReleaseHolder frees the slot of key's holder whose token is token.
func (b *Backend) ReleaseHolder(ctx context.Context, key string, token backend.Token) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(key)
	i := slices.IndexFunc(e.holders, func(s *slot) bool { return s.token == token })
	if i < 0 {
		return fmt.Errorf("%w: lock %q has no holder with token %d", backend.ErrLost, key, token)
	}
	e.holders = slices.Delete(e.holders, i, i+1)
	b.notify()
	return nil
}

// Revoke marks key's holder of token (every holder, for 0) revoked: its
// renewals fail, and its slot stays taken until it releases or expires. A
// slot kept only for its minimum hold has no command left: it goes at once.
func (b *Backend) Revoke(ctx context.Context, key string, token backend.Token) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(key)
	found := false
	e.holders = slices.DeleteFunc(e.holders, func(s *slot) bool {
		if token != 0 && s.token != token {
			return false
		}
		found = found || !s.released
		s.revoked = true
		return s.released
	})
	b.notify()
	if token != 0 && !found {
		return fmt.Errorf("%w: lock %q has no holder with token %d", backend.ErrLost, key, token)
	}
	return nil
}

// Expire ends every lease of key at once, as if its holders had stopped
// renewing a TTL ago.
func (b *Backend) Expire(key string) { _ = b.ForceRelease(context.Background(), key) }

// ExpireLease ends l's lease alone, as if its holder had been killed a TTL
// ago; the key's other holders keep theirs.
func (b *Backend) ExpireLease(l backend.Lease) {
	ml := l.(*lease)
	_ = b.ReleaseHolder(context.Background(), ml.key, ml.s.token)
}
