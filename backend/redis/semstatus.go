package redis

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// semStatus describes a semaphore of limit from flat, the scripts'
// {value, ms left, record, ...} of its live holders (see sem_holders in
// lua/sem.lua): Holders oldest token first, the top-level fields
// repeating Holders[0]. No holder is a free key (Limit 0).
func semStatus(key string, limit int, flat []any) (backend.Status, error) {
	if len(flat)%3 != 0 {
		return backend.Status{}, fmt.Errorf("%w: semaphore holders %v", errMalformed, flat)
	}
	var hs []backend.Status
	for i := 0; i < len(flat); i += 3 {
		value, _ := flat[i].(string)
		ms, _ := flat[i+1].(int64)
		h, err := parseValue(key, value, time.Duration(ms)*time.Millisecond)
		if err != nil {
			return backend.Status{}, err
		}
		rec, _ := flat[i+2].(string)
		addSemRecord(&h, rec)
		hs = append(hs, h)
	}
	if len(hs) == 0 {
		return backend.Status{Key: key}, nil
	}
	slices.SortFunc(hs, func(a, b backend.Status) int { return cmp.Compare(a.Token, b.Token) })
	st := hs[0]
	st.Limit, st.Holders = limit, hs
	return st, nil
}

// addSemRecord fills h's Since, Renewed, Info and Revoked from a
// holder's record, "SINCE RENEWED RELEASED INFO" (RELEASED is 0 while
// live, 1 once released into its minimum hold, 2 once revoked); a damaged
// record shows nothing.
func addSemRecord(h *backend.Status, rec string) {
	parts := strings.SplitN(rec, " ", 4)
	if len(parts) != 4 {
		return
	}
	h.Since, h.Renewed = micros(parts[0]), micros(parts[1])
	h.Revoked = parts[2] == "2"
	_ = json.Unmarshal([]byte(parts[3]), &h.Info)
}
