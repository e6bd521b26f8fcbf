package redis

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// The holder's record, lockrun:{KEY}:meta, is a hash written in the same
// script as the lock: "value" (the lock value it belongs to; a record of
// another grant is ignored), "since" and "renewed" (the server's TIME in
// microseconds at the grant and at the last renewal), "info" (the
// holder's backend.HolderInfo as JSON) and, once the lease has ended
// early, "released": "1" after a release into its minimum hold, "revoked"
// after a Revoke (revoke.lua). It expires with the lock.

// revokedMark is the record's "released" field of a revoked lease.
const revokedMark = "revoked"

// encodeInfo is the holder's info as the record keeps it.
func encodeInfo(info backend.HolderInfo) string {
	b, _ := json.Marshal(info) // strings only: cannot fail
	return string(b)
}

// addRecord fills st's Since, Renewed, Info and Revoked from rec, the
// reply of HMGET value since renewed info released, when it belongs to
// the lock's value.
func addRecord(st *backend.Status, value string, rec []any) {
	if len(rec) != 5 {
		return
	}
	if v, _ := rec[0].(string); v != value {
		return
	}
	st.Since, st.Renewed = micros(rec[1]), micros(rec[2])
	if s, ok := rec[3].(string); ok {
		_ = json.Unmarshal([]byte(s), &st.Info) // a damaged record shows no info
	}
	st.Revoked = rec[4] == revokedMark
}

// micros reads a time stored as microseconds since the epoch.
func micros(v any) time.Time {
	s, _ := v.(string)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(n)
}

// scanBatch is how many keys one SCAN step asks the server to look at.
const scanBatch = 500

// List reports the held locks (plain ones and semaphores) whose key
// starts with prefix, sorted by key.
// It walks the server's keys with SCAN (never KEYS, which blocks the
// server), then inspects each lock it found; a lock taken or freed during
// the walk may or may not be listed.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Status, error) {
	if prefix != "" {
		if err := backend.ValidateKey(prefix); err != nil {
			return nil, err
		}
	}
	// ":l*" matches a plain lock's ":lock" and a semaphore's ":limit",
	// and none of the other parts of a key.
	pattern := globEscape(b.prefix+"{"+prefix) + "*}:l*"
	var keys []string
	iter := b.client.Scan(ctx, 0, pattern, scanBatch).Iterator()
	for iter.Next(ctx) {
		name, ok := strings.CutSuffix(strings.TrimPrefix(iter.Val(), b.prefix+"{"), "}:lock")
		if !ok {
			name, ok = strings.CutSuffix(strings.TrimPrefix(iter.Val(), b.prefix+"{"), "}:limit")
		}
		if ok && backend.ValidateKey(name) == nil && !slices.Contains(keys, name) {
			keys = append(keys, name)
		}
	}
	if err := iter.Err(); err != nil {
		return nil, b.unavailable("list", prefix, err)
	}
	slices.Sort(keys)
	var held []backend.Status
	for _, key := range keys {
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

// globEscape quotes the characters that SCAN's MATCH treats as a pattern.
func globEscape(s string) string {
	var out strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			out.WriteByte('\\')
		}
		out.WriteRune(r)
	}
	return out.String()
}
