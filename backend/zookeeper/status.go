package zookeeper

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/backend"
)

// Inspect reads key's queue and record: the lowest contender holds it
// (a node of another client, such as Curator's, is named in parentheses);
// with no contender, a min-hold may still keep it. A free key reports the
// last token issued for it (0 when never taken). TTL is known only for a
// min-hold: a session's time left is the server's secret.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Status, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Status{}, err
	}
	s, err := b.adminSession(ctx)
	if err != nil {
		return backend.Status{Key: key}, b.failed(ctx, "connecting", key, err)
	}
	st, err := b.inspect(ctx, s, key)
	if err != nil {
		return backend.Status{Key: key}, b.failed(ctx, "reading the lock", key, err)
	}
	return st, nil
}

func (b *Backend) inspect(ctx context.Context, s *session, key string) (backend.Status, error) {
	for range 3 {
		kids, err := contenders(ctx, b, s, key)
		if err != nil {
			return backend.Status{}, err
		}
		rec, _, err := b.readState(ctx, s, key)
		if err != nil {
			return backend.Status{}, err
		}
		if limit := semLimit(kids, rec, time.Now()); limit > 1 {
			return b.semStatus(ctx, s, key, kids, rec, limit)
		}
		if len(kids) == 0 {
			if rec.held(time.Now()) {
				return holdStatus(key, rec), nil
			}
			return backend.Status{Key: key, Token: backend.Token(rec.Token)}, nil
		}
		data, err := call(ctx, b.cfg.RequestTimeout, func() ([]byte, error) {
			data, _, err := s.conn.Get(b.lockPath(key) + "/" + kids[0])
			return data, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // released meanwhile: read again
		} else if err != nil {
			return backend.Status{}, err
		}
		st := contenderStatus(key, kids[0], data)
		if st.Token == 0 { // queued first but not granted yet
			st.Token = backend.Token(rec.Token)
		}
		return st, nil
	}
	return backend.Status{}, errors.New("the queue changed three times while it was read")
}

// semLimit is the limit of key's semaphore, whose queue is kids and
// record rec: the lowest node's, or with none the min-holds'; 1 or 0 for
// a plain lock or a free key.
func semLimit(kids []string, rec state, now time.Time) int {
	if len(kids) > 0 {
		return nodeLimit(kids[0])
	}
	if len(rec.holds(now, "")) > 0 {
		return rec.Limit
	}
	return 0
}

// List reports the held locks whose key starts with prefix, sorted by key.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Status, error) {
	s, err := b.adminSession(ctx)
	if err != nil {
		return nil, b.failed(ctx, "connecting", "", err)
	}
	keys, err := call(ctx, b.cfg.RequestTimeout, func() ([]string, error) {
		keys, _, err := s.conn.Children(b.cfg.Root)
		return keys, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	} else if err != nil {
		return nil, b.failed(ctx, "listing the locks", "", err)
	}
	keys = slices.DeleteFunc(keys, func(k string) bool { return !strings.HasPrefix(k, prefix) || backend.ValidateKey(k) != nil })
	slices.Sort(keys)
	var out []backend.Status
	for _, k := range keys {
		st, err := b.inspect(ctx, s, k)
		if err != nil {
			return nil, b.failed(ctx, "reading the lock", k, err)
		}
		if st.Held {
			out = append(out, st)
		}
	}
	return out, nil
}

// ForceRelease deletes the holder's node, whoever's it is, and clears a
// min-hold: the next in line takes over, and the holder's next renewal
// finds its node gone (ErrLost). For a semaphore it deletes every slot's
// node and clears every hold. The token record only ever grows.
func (b *Backend) ForceRelease(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	s, err := b.adminSession(ctx)
	if err != nil {
		return b.failed(ctx, "connecting", key, err)
	}
	kids, err := contenders(ctx, b, s, key)
	if err != nil {
		return b.failed(ctx, "reading the lock", key, err)
	}
	holders := kids[:min(len(kids), 1)]
	if len(kids) > 0 && nodeLimit(kids[0]) > 1 {
		rec, _, err := b.readState(ctx, s, key)
		if err != nil {
			return b.failed(ctx, "reading the lock's record", key, err)
		}
		holders = slots(kids, rec, time.Now())
	}
	for _, k := range holders {
		_, err := call(ctx, b.cfg.RequestTimeout, func() (struct{}, error) {
			return struct{}{}, s.conn.Delete(b.lockPath(key)+"/"+k, -1)
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return b.failed(ctx, "breaking the lock", key, err)
		}
	}
	return b.clearHold(ctx, s, key)
}

// clearHold ends a min-hold on key, a semaphore's too, keeping the token.
func (b *Backend) clearHold(ctx context.Context, s *session, key string) error {
	for range 3 {
		rec, ver, err := b.readState(ctx, s, key)
		if err != nil {
			return b.failed(ctx, "reading the lock's record", key, err)
		}
		if rec.HoldUntil == 0 && len(rec.Holds) == 0 {
			return nil
		}
		_, err = call(ctx, b.cfg.RequestTimeout, func() (*zk.Stat, error) {
			return s.conn.Set(b.statePath(key), encode(state{Token: rec.Token}), ver)
		})
		if !errors.Is(err, zk.ErrBadVersion) {
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return b.failed(ctx, "clearing the min-hold", key, err)
			}
			return nil
		}
	}
	return b.failed(ctx, "clearing the min-hold", key, errors.New("the record kept changing"))
}
