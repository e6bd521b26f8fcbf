package redlock

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// view is one master's answer to peek.lua.
type view struct {
	value   string // "" when free there
	pttl    time.Duration
	counter backend.Token // the highest token the master recorded
	clock   backend.Token // the master's clock in µs
	limit   string        // a semaphore's limit, when the key is one there
}

// views are the masters' answers to one peek, with what they decide.
type views struct {
	replies []reply[view]
	mine    int // masters free, or held by this run
	others  int // masters held by another run
}

// peek reads every master's view of r's lock (queuing r's waiter where it
// is held) until the views decide whether a grant can be tried: only when
// a majority is free and no master that answers holds another run's
// value. A copy of a lease on a minority is either an acquire on its way
// (in or out) or a lease whose other copies were lost: masters restarted
// empty under a live holder. Granting then would make two holders; so
// the lock counts as held until that copy goes, with its holder's next
// renewal or its expiry. Peek waits a little for the last masters for
// the same reason.
func (b *Backend) peek(ctx context.Context, r *request) views {
	keys := r.names.with(r.names.lock, r.names.counter, r.names.queue)
	args := []any{r.waiter, r.place, r.o.RunID, millis(r.o.TTL), r.names.wake} // copied: late calls outlive this one
	rs := fanoutLinger(ctx, b.masters, func(ctx context.Context, m *master) (view, error) {
		res, err := b.scripts.peek.Run(ctx, m.client, keys, args...).Slice()
		if err != nil {
			return view{}, err
		}
		return parseView(res)
	}, func(rs []reply[view]) bool {
		v := count(r, rs)
		return v.mine+v.others >= b.quorum && (v.others > 0 || v.mine >= b.quorum)
	}, b.linger(r.o.TTL))
	return count(r, rs)
}

// free says whether the views let r try a grant.
func (v views) free(quorum int) bool { return v.mine >= quorum && v.others == 0 }

func count(r *request, rs []reply[view]) views {
	v := views{replies: rs}
	for _, x := range rs {
		switch {
		case x.err != nil:
		case x.v.limit != "": // a semaphore's holders or waiters
			v.others++
		case x.v.value == "" || runOf(x.v.value) == r.o.RunID:
			v.mine++
		default:
			v.others++
		}
	}
	return v
}

// parseView reads peek.lua's {value, pttl, counter, clock, limit}.
func parseView(res []any) (view, error) {
	if len(res) != 5 {
		return view{}, fmt.Errorf("%w: peek reply %v", errMalformed, res)
	}
	var v view
	var err error
	v.value, _ = res[0].(string)
	pttl, _ := res[1].(int64)
	v.pttl = time.Duration(pttl) * time.Millisecond
	if c, ok := res[2].(string); ok {
		if v.counter, err = parseToken(c); err != nil {
			return view{}, err
		}
	}
	clock, _ := res[3].(string)
	v.clock, err = parseToken(clock)
	v.limit, _ = res[4].(string)
	return v, err
}

// highest is the highest counter the views report, and the masters' clocks.
func (v views) highest() (backend.Token, []backend.Token) {
	var top backend.Token
	var clocks []backend.Token
	for _, x := range v.replies {
		if x.err == nil {
			top = max(top, x.v.counter)
			clocks = append(clocks, x.v.clock)
		}
	}
	return top, clocks
}

// holder describes who blocks the lock (the value most masters hold) and
// how long until enough masters are free for a majority: the time the
// waiter sleeps unless a release wakes it first. A lock without expiry,
// which lockrun never writes, counts as ttl. It also says whether that
// value is on a majority.
func (b *Backend) holder(key, runID string, v views, ttl time.Duration) (backend.Status, bool) {
	byValue := make(map[string]int)
	var left []time.Duration
	for _, x := range v.replies {
		if x.err != nil || x.v.value == "" || runOf(x.v.value) == runID {
			continue
		}
		byValue[x.v.value]++
		left = append(left, pttlOr(x.v.pttl, ttl))
	}
	top := ""
	for value, n := range byValue {
		if n > byValue[top] || n == byValue[top] && value > top {
			top = value
		}
	}
	st, err := parseValue(key, top, 0)
	if err != nil {
		st = backend.Status{Key: key, Held: true}
	}
	slices.Sort(left)
	st.TTL = ttl
	if k := b.quorum - v.mine; k >= 1 && k <= len(left) {
		st.TTL = left[k-1]
	}
	return st, byValue[top] >= b.quorum
}

// blocked is the attempt of a try that found no majority free: held by
// the holder of a majority, or contended when no one has one (acquirers
// racing, grants on their way or being given back).
func (b *Backend) blocked(r *request, v views) attempt {
	st, majority := b.holder(r.key, r.o.RunID, v, r.o.TTL)
	return attempt{held: st, contended: !majority}
}

func pttlOr(pttl, ttl time.Duration) time.Duration {
	if pttl < 0 {
		return ttl
	}
	return pttl
}

// semaphore reports the limit of the semaphore that a majority of the
// views found on the key (holders or waiters), if one did: a plain lock
// may not be granted beside it.
func (v views) semaphore(quorum int) (string, bool) {
	count := make(map[string]int)
	for _, x := range v.replies {
		if x.err == nil && x.v.limit != "" {
			if count[x.v.limit]++; count[x.v.limit] >= quorum {
				return x.v.limit, true
			}
		}
	}
	return "", false
}
