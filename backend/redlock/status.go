package redlock

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// record is one master's answer to inspect.lua.
type record struct {
	view
	since, renewed time.Time
	info           backend.HolderInfo
	holders        []semRecord // a semaphore's live holders there
	revoked        string      // the lock value revoked there, if any
}

// Inspect reports the holder when a majority of the masters hold the same
// value, else the lock as free with the highest token a master recorded.
// TTL is the time until fewer than a majority hold it.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Status, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Status{}, err
	}
	n := b.names(key)
	keys := n.with(n.lock, n.counter, n.record)
	rs := fanout(ctx, b.masters, func(ctx context.Context, m *master) (record, error) {
		res, err := b.scripts.inspect.Run(ctx, m.client, keys).Slice()
		if err != nil {
			return record{}, err
		}
		return parseRecord(res)
	}, func(rs []reply[record]) bool {
		// A semaphore is read from every master that answers: its
		// holders are on majorities of their own.
		value, done := b.majorityValue(rs)
		return done && (value != "" || !slices.ContainsFunc(rs, func(x reply[record]) bool { return x.v.limit != "" }))
	})
	if got := answered(rs); got < b.quorum {
		return backend.Status{Key: key}, b.noQuorum("inspect", key, got, errorsOf(rs))
	}
	value, _ := b.majorityValue(rs)
	if st := b.semStatus(key, rs); value == "" && st.Held {
		return st, nil
	}
	if value == "" {
		st := backend.Status{Key: key}
		for _, x := range rs {
			if x.err == nil {
				st.Token = max(st.Token, x.v.counter)
			}
		}
		return st, nil
	}
	return b.heldStatus(key, value, rs)
}

// majorityValue is the lock value a majority of rs hold ("" for free), and
// whether rs decide it.
func (b *Backend) majorityValue(rs []reply[record]) (string, bool) {
	count := make(map[string]int)
	for _, x := range rs {
		if x.err == nil {
			count[x.v.value]++
			if count[x.v.value] >= b.quorum {
				return x.v.value, true
			}
		}
	}
	return "", len(rs) == len(b.masters)
}

// heldStatus describes the holder of value from the masters that hold it:
// the earliest grant, the latest renewal, and the time until fewer than a
// majority hold it.
func (b *Backend) heldStatus(key, value string, rs []reply[record]) (backend.Status, error) {
	var left []time.Duration
	var st backend.Status
	for _, x := range rs {
		if x.err != nil || x.v.value != value {
			continue
		}
		left = append(left, x.v.pttl)
		if !x.v.since.IsZero() && (st.Since.IsZero() || x.v.since.Before(st.Since)) {
			st.Since, st.Info = x.v.since, x.v.info
		}
		if x.v.renewed.After(st.Renewed) {
			st.Renewed = x.v.renewed
		}
		// One master's mark is enough to show: its holder is stopping.
		st.Revoked = st.Revoked || x.v.revoked == value
	}
	slices.Sort(left)
	slices.Reverse(left)
	held, err := parseValue(key, value, left[b.quorum-1])
	if err != nil {
		return backend.Status{Key: key}, fmt.Errorf("%w: redlock %s: inspect %q: %w", backend.ErrUnavailable, b.url, key, err)
	}
	held.Since, held.Renewed, held.Info, held.Revoked = st.Since, st.Renewed, st.Info, st.Revoked
	return held, nil
}

// parseRecord reads inspect.lua's {value, pttl, counter, since, renewed,
// info, limit, holders, revoked}.
func parseRecord(res []any) (record, error) {
	if len(res) != 9 {
		return record{}, fmt.Errorf("%w: inspect reply %v", errMalformed, res)
	}
	var r record
	r.value, _ = res[0].(string)
	pttl, _ := res[1].(int64)
	r.pttl = time.Duration(pttl) * time.Millisecond
	if c, ok := res[2].(string); ok {
		var err error
		if r.counter, err = parseToken(c); err != nil {
			return record{}, err
		}
	}
	r.since, r.renewed = micros(res[3]), micros(res[4])
	if s, ok := res[5].(string); ok {
		_ = json.Unmarshal([]byte(s), &r.info) // a record we cannot read is left out, not an outage
	}
	r.limit, _ = res[6].(string)
	r.revoked, _ = res[8].(string)
	flat, _ := res[7].([]any)
	var err error
	r.holders, err = parseSemRecords(flat)
	return r, err
}

// micros reads a time the scripts stored in µs since the epoch; zero when
// missing or unreadable.
func micros(v any) time.Time {
	s, _ := v.(string)
	t, err := parseToken(s)
	if err != nil || t == 0 {
		return time.Time{}
	}
	return time.UnixMicro(int64(t))
}
