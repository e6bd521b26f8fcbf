package redlock

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// semRecord is one semaphore holder as one master records it.
type semRecord struct {
	value          string
	left           time.Duration
	since, renewed time.Time
	info           backend.HolderInfo
	revoked        bool // RELEASED is 2 (see lua/revoke.lua)
}

// parseSemRecords reads sem_holders' {value, ms left, record, ...}, each
// record "SINCE RENEWED RELEASED INFO" (a damaged one shows nothing;
// RELEASED is 0 while live, 1 once released into a minimum hold, 2 once
// revoked).
func parseSemRecords(flat []any) ([]semRecord, error) {
	if len(flat)%3 != 0 {
		return nil, fmt.Errorf("%w: semaphore holders %v", errMalformed, flat)
	}
	var hs []semRecord
	for i := 0; i < len(flat); i += 3 {
		var h semRecord
		h.value, _ = flat[i].(string)
		ms, _ := flat[i+1].(int64)
		h.left = time.Duration(ms) * time.Millisecond
		rec, _ := flat[i+2].(string)
		if parts := strings.SplitN(rec, " ", 4); len(parts) == 4 {
			h.since, h.renewed = micros(parts[0]), micros(parts[1])
			h.revoked = parts[2] == "2"
			_ = json.Unmarshal([]byte(parts[3]), &h.info)
		}
		hs = append(hs, h)
	}
	return hs, nil
}

// semStatus describes key's semaphore from the masters' records: each
// value that a majority holds is a holder (its earliest grant, latest
// renewal, and the time until fewer than a majority hold it), oldest token
// first; the limit is the one most masters record. Held is false when no
// holder is on a majority.
func (b *Backend) semStatus(key string, rs []reply[record]) backend.Status {
	byValue := make(map[string][]semRecord)
	limits := make(map[string]int)
	for _, x := range rs {
		if x.err != nil {
			continue
		}
		if x.v.limit != "" {
			limits[x.v.limit]++
		}
		for _, h := range x.v.holders {
			byValue[h.value] = append(byValue[h.value], h)
		}
	}
	var hs []backend.Status
	for value, recs := range byValue {
		if len(recs) < b.quorum {
			continue
		}
		if h, err := parseValue(key, value, 0); err == nil {
			hs = append(hs, merge(h, recs, b.quorum))
		}
	}
	if len(hs) == 0 {
		return backend.Status{Key: key}
	}
	slices.SortFunc(hs, func(a, b backend.Status) int { return cmp.Compare(a.Token, b.Token) })
	st := hs[0]
	st.Holders = hs
	top := 0
	for limit, n := range limits {
		if l, err := strconv.Atoi(limit); err == nil && n > top {
			st.Limit, top = l, n
		}
	}
	return st
}

// merge fills h from the records of it that the masters keep.
func merge(h backend.Status, recs []semRecord, quorum int) backend.Status {
	var left []time.Duration
	for _, r := range recs {
		left = append(left, r.left)
		if !r.since.IsZero() && (h.Since.IsZero() || r.since.Before(h.Since)) {
			h.Since, h.Info = r.since, r.info
		}
		if r.renewed.After(h.Renewed) {
			h.Renewed = r.renewed
		}
		h.Revoked = h.Revoked || r.revoked
	}
	slices.Sort(left)
	slices.Reverse(left)
	h.TTL = left[quorum-1]
	return h
}
