package redlock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// semView is one master's answer to sem_peek.lua.
type semView struct {
	plain   string // the plain lock's value there, if held
	limit   string // the semaphore's limit there, if it has holders or waiters
	counter backend.Token
	clock   backend.Token
	taken   map[int]string           // slot index -> the live holder's value
	left    map[string]time.Duration // the live holders' time left
	turn    bool                     // a free slot is the caller's turn there
}

// peekSem reads every master's view of r's semaphore (queuing r's waiter
// where no slot is its turn), waiting a little for the last masters, as
// peek does.
func (b *Backend) peekSem(ctx context.Context, r *request) []reply[semView] {
	keys := append(append([]string{r.names.lock, r.names.counter}, r.names.sem...), r.names.slotOf)
	args := []any{r.waiter, r.place, r.o.RunID, millis(r.o.TTL), strconv.Itoa(r.o.EffectiveLimit()), r.names.wake}
	return fanoutLinger(ctx, b.masters, func(ctx context.Context, m *master) (semView, error) {
		res, err := b.scripts.semPeek.Run(ctx, m.client, keys, args...).Slice()
		if err != nil {
			return semView{}, err
		}
		return parseSemView(res)
	}, func(rs []reply[semView]) bool { return answered(rs) == len(b.masters) }, b.linger(r.o.TTL))
}

// parseSemView reads sem_peek.lua's {plain, limit, counter, clock,
// {index, value, ms left, ...}, turn}.
func parseSemView(res []any) (semView, error) {
	if len(res) != 6 {
		return semView{}, fmt.Errorf("%w: peek reply %v", errMalformed, res)
	}
	v := semView{taken: map[int]string{}, left: map[string]time.Duration{}}
	v.plain, _ = res[0].(string)
	v.limit, _ = res[1].(string)
	var err error
	if c, ok := res[2].(string); ok {
		if v.counter, err = parseToken(c); err != nil {
			return semView{}, err
		}
	}
	clock, _ := res[3].(string)
	if v.clock, err = parseToken(clock); err != nil {
		return semView{}, err
	}
	flat, _ := res[4].([]any)
	for i := 0; i+2 < len(flat); i += 3 {
		s, _ := flat[i].(string)
		index, err := strconv.Atoi(s)
		value, _ := flat[i+1].(string)
		ms, _ := flat[i+2].(int64)
		if err != nil || value == "" {
			return semView{}, fmt.Errorf("%w: peek reply %v", errMalformed, res)
		}
		v.taken[index], v.left[value] = value, time.Duration(ms)*time.Millisecond
	}
	turn, _ := res[5].(int64)
	v.turn = turn == 1
	return v, nil
}

// conflicts says whether v holds the key in a way r may not share: the
// plain lock, or a semaphore of another limit.
func (v semView) conflicts(r *request) bool {
	return v.plain != "" || v.limit != "" && v.limit != strconv.Itoa(r.o.EffectiveLimit())
}

// semMismatch reports the key's other limit when a majority of the
// masters hold or await it so ("1": the plain lock).
func (b *Backend) semMismatch(r *request, rs []reply[semView]) (string, bool) {
	count := make(map[string]int)
	for _, x := range rs {
		if x.err != nil || !x.v.conflicts(r) {
			continue
		}
		have := x.v.limit
		if x.v.plain != "" {
			have = "1"
		}
		if count[have]++; count[have] >= b.quorum {
			return have, true
		}
	}
	return "", false
}

// freeIndex is the slot index r may try: one that r's run already holds
// somewhere (a retry), else the lowest one free, and r's turn, on a
// majority, provided no master that answered gives it to another run or
// holds the key in a way r may not share. A copy on a minority may be a
// grant on its way, or a live holder whose other copies were lost: see
// peek.
func (b *Backend) freeIndex(r *request, rs []reply[semView]) (int, bool) {
	limit := r.o.EffectiveLimit()
	order := make([]int, 0, limit)
	for _, x := range rs {
		for i, v := range x.v.taken {
			if x.err == nil && runOf(v) == r.o.RunID && !slices.Contains(order, i) {
				order = append(order, i)
			}
		}
	}
	for i := range limit {
		if !slices.Contains(order, i) {
			order = append(order, i)
		}
	}
	for _, i := range order {
		if b.indexFree(r, rs, i) {
			return i, true
		}
	}
	return 0, false
}

// indexFree says whether slot index i is free for r, as freeIndex says.
func (b *Backend) indexFree(r *request, rs []reply[semView], i int) bool {
	free := 0
	for _, x := range rs {
		if x.err != nil {
			continue
		}
		v, taken := x.v.taken[i]
		if x.v.conflicts(r) || taken && runOf(v) != r.o.RunID {
			return false
		}
		if x.v.turn {
			free++
		}
	}
	return free >= b.quorum
}

// semHighest is the highest counter the views report, and the masters'
// clocks.
func semHighest(rs []reply[semView]) (backend.Token, []backend.Token) {
	var top backend.Token
	var clocks []backend.Token
	for _, x := range rs {
		if x.err == nil {
			top = max(top, x.v.counter)
			clocks = append(clocks, x.v.clock)
		}
	}
	return top, clocks
}

// semBlocked is the attempt of a try that found no slot for r: the
// holders that a majority of the views hold, and when to look again (the
// soonest time a holder's majority can end). It is contended (worth
// trying again soon) when the slots are not all held by a majority and
// no majority's queue holds r back, or when forced.
func (b *Backend) semBlocked(r *request, rs []reply[semView], forced bool) attempt {
	st := semHolders(r.key, r.o.EffectiveLimit(), b.quorum, rs)
	st.TTL = r.o.TTL
	for _, h := range st.Holders {
		st.TTL = min(st.TTL, h.TTL)
	}
	turns := 0
	for _, x := range rs {
		if x.err == nil && x.v.turn {
			turns++
		}
	}
	full := len(st.Holders) >= r.o.EffectiveLimit()
	return attempt{held: st, contended: forced || !full && turns >= b.quorum}
}

// semHolders describes the semaphore of limit from the views: each value
// that a majority holds is a holder, whose time left is the time until
// fewer than a majority hold it.
func semHolders(key string, limit, quorum int, rs []reply[semView]) backend.Status {
	lefts := make(map[string][]time.Duration)
	for _, x := range rs {
		if x.err == nil {
			for value, left := range x.v.left {
				lefts[value] = append(lefts[value], left)
			}
		}
	}
	var hs []backend.Status
	for value, left := range lefts {
		if len(left) < quorum {
			continue
		}
		slices.Sort(left)
		slices.Reverse(left)
		if h, err := parseValue(key, value, left[quorum-1]); err == nil {
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		return backend.Status{Key: key}
	}
	slices.SortFunc(hs, func(a, b backend.Status) int { return cmp.Compare(a.Token, b.Token) })
	st := hs[0]
	st.Limit, st.Holders = limit, hs
	return st
}
