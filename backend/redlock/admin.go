package redlock

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/lockrun/lockrun/backend"
)

// ForceRelease breaks the lock on every master that answers, whoever
// holds it, and wakes the next waiter; the holder's next renewal finds its
// value gone from a majority and reports ErrLost. The token counters are
// untouched. Fewer than a majority answering is an error: the lock may
// still be held.
func (b *Backend) ForceRelease(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	n := b.names(key)
	rs := fanout(ctx, b.masters, func(ctx context.Context, m *master) (int64, error) {
		return b.scripts.force.Run(ctx, m.client, n.with(n.endedKeys(n.lock, n.queue, n.record)...), n.wake).Int64()
	}, nil)
	if got := answered(rs); got < b.quorum {
		return b.noQuorum("force-release", key, got, errorsOf(rs))
	}
	return nil
}

var _ backend.HolderReleaser = (*Backend)(nil)

// ReleaseHolder breaks, on every master that answers, the hold of key's
// holder whose token is token (the plain lock's, or one semaphore
// holder's), and wakes the waiters that may take its place. Fewer than a
// majority answering is an error, as for ForceRelease; no master having
// a live holder with that token is an error wrapping backend.ErrLost.
func (b *Backend) ReleaseHolder(ctx context.Context, key string, token backend.Token) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	n := b.names(key)
	rs := fanout(ctx, b.masters, func(ctx context.Context, m *master) (int64, error) {
		return b.scripts.holder.Run(ctx, m.client, n.with(n.endedKeys(n.lock, n.queue, n.record)...), token.String(), n.wake, millis(endedKeep)).Int64()
	}, nil)
	if got := answered(rs); got < b.quorum {
		return b.noQuorum("release-holder", key, got, errorsOf(rs))
	}
	if broke, _, _ := tally(rs, ours); broke == 0 {
		return fmt.Errorf("%w: lock %q on redlock %s has no holder with token %s", backend.ErrLost, key, b.url, token)
	}
	return nil
}

// List reports the locks (plain ones and semaphores) held by a majority whose key starts with
// prefix, sorted by key. It finds candidates with SCAN on every master,
// then inspects each.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Status, error) {
	// ":l*" matches a plain lock's ":lock" and a semaphore's ":limit",
	// and none of the other parts of a key.
	pattern := globEscape(b.prefix) + "{" + globEscape(prefix) + "*}:l*"
	rs := fanout(ctx, b.masters, func(ctx context.Context, m *master) ([]string, error) {
		var keys []string
		it := m.client.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			name := strings.TrimPrefix(it.Val(), b.prefix+"{")
			if key, ok := strings.CutSuffix(name, "}:lock"); ok {
				keys = append(keys, key)
			} else if key, ok := strings.CutSuffix(name, "}:limit"); ok {
				keys = append(keys, key)
			}
		}
		return keys, it.Err()
	}, nil)
	if got := answered(rs); got < b.quorum {
		return nil, b.noQuorum("list", prefix, got, errorsOf(rs))
	}
	var keys []string
	for _, x := range rs {
		keys = append(keys, x.v...)
	}
	slices.Sort(keys)
	var held []backend.Status
	for _, key := range slices.Compact(keys) {
		if backend.ValidateKey(key) != nil {
			continue // not a key lockrun writes
		}
		st, err := b.Inspect(ctx, key)
		if err != nil {
			return nil, err
		}
		if st.Held {
			held = append(held, st)
		}
	}
	return held, nil
}

// globEscape quotes the characters that SCAN's MATCH treats as patterns.
func globEscape(s string) string {
	var sb strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\^`, c) {
			sb.WriteByte('\\')
		}
		sb.WriteRune(c)
	}
	return sb.String()
}
