package redlock

import (
	"context"
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
		return b.scripts.force.Run(ctx, m.client, []string{n.lock, n.queue, n.record}, n.wake).Int64()
	}, nil)
	if got := answered(rs); got < b.quorum {
		return b.noQuorum("force-release", key, got, errorsOf(rs))
	}
	return nil
}

// List reports the locks held (by a majority) whose key starts with
// prefix, sorted by key. It finds candidates with SCAN on every master,
// then inspects each.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Status, error) {
	pattern := globEscape(b.prefix) + "{" + globEscape(prefix) + "*}:lock"
	rs := fanout(ctx, b.masters, func(ctx context.Context, m *master) ([]string, error) {
		var keys []string
		it := m.client.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			name := strings.TrimPrefix(it.Val(), b.prefix+"{")
			keys = append(keys, strings.TrimSuffix(name, "}:lock"))
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
