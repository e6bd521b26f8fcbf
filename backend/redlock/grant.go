package redlock

import (
	"context"
	"fmt"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
)

// Replies of grant.lua.
const (
	grantHeld    = 0
	grantGranted = 1
	grantStale   = 2
	grantLimit   = 3 // the key is held or awaited with another limit there
	grantQueued  = 4 // a semaphore's waiters queued first are still to be served
	// grantRestarted: the master started less than the restart wait ago,
	// and may have lost a live lease's copy; it grants nothing new.
	grantRestarted = 5
)

// grantReply is one master's answer to grant.lua.
type grantReply struct {
	code    int64
	value   string // the holder's when held
	pttl    time.Duration
	counter backend.Token // the master's counter when stale
}

// try makes one attempt: a peek at every master, then, when a majority is
// free, a grant on every master with a token above all they reported.
func (b *Backend) try(ctx context.Context, r *request) (attempt, error) {
	start := time.Now() // before the first request: no master's TTL starts earlier
	pctx, cancel := context.WithTimeout(ctx, b.callTimeout(r.o.TTL))
	v := b.peek(pctx, r)
	cancel()
	if n := answered(v.replies); n < b.quorum {
		return attempt{}, b.noQuorum("acquire", r.key, n, errorsOf(v.replies))
	}
	if have, ok := v.semaphore(b.quorum); ok {
		return attempt{}, b.mismatch(r, have)
	}
	if !v.free(b.quorum) {
		return b.blocked(r, v), nil
	}
	highest, clocks := v.highest()
	for i := 1; ; i++ {
		token, err := nextToken(highest, clocks, time.Now())
		if err != nil {
			return attempt{}, fmt.Errorf("%w: redlock %s: acquire %q: %w", backend.ErrUnavailable, b.url, r.key, err)
		}
		value := token.String() + " " + r.o.RunID + " " + r.o.Holder
		g := b.grant(ctx, r, value, token)
		if ok, _, _ := tally(g.rs, granted); ok >= b.quorum {
			return b.granted(r, value, token, start, g, func() { b.abandon(r, value, g) })
		}
		b.abandon(r, value, g)
		stale := staleTop(g.rs)
		if stale == 0 || i == staleRetries {
			return b.notGranted(r, g.rs)
		}
		highest = max(highest, stale)
	}
}

func granted(g grantReply) bool { return g.code == grantGranted }

// round is one grant sent to every master.
type round struct {
	rs []reply[grantReply] // the replies that decided it
	// landed has a channel per master, closed once its call returned: a
	// call still running may yet set the lock, and a release sent before
	// it could arrive first and miss it.
	landed map[*master]chan struct{}
}

// grant runs grant.lua on every master until a majority granted the lock
// or too many refused it for one. The calls to the other masters go on in
// the background (by the round's timeout or the caller's deadline, even
// when the caller gives up), so that every master that answers records
// the token.
func (b *Backend) grant(ctx context.Context, r *request, value string, token backend.Token) round {
	ctx, stop := detached(ctx, b.callTimeout(r.o.TTL))
	defer stop()
	keys := r.names.with(r.names.endedKeys(r.names.lock, r.names.counter, r.names.queue, r.names.record)...)
	args := []any{value, r.px, token.String(), r.o.RunID, r.waiter, r.info, r.names.wake, r.restartMS, r.place} // copied: late calls outlive this one
	return b.grantWith(ctx, b.scripts.grant, keys, args, b.linger(r.o.TTL))
}

// grantWith runs script, a grant script, with keys and args on every
// master, as grant says.
func (b *Backend) grantWith(ctx context.Context, script *goredis.Script, keys []string, args []any, linger time.Duration) round {
	g := round{landed: make(map[*master]chan struct{}, len(b.masters))}
	for _, m := range b.masters {
		g.landed[m] = make(chan struct{})
	}
	// Lingering (a plain lock's) for the last masters: a healthy master's
	// refusal, heard in the round, lets the lease take that master back
	// later (lua/renew.lua).
	g.rs = fanoutLinger(ctx, b.masters, func(ctx context.Context, m *master) (grantReply, error) {
		defer close(g.landed[m])
		res, err := script.Run(ctx, m.client, keys, args...).Slice()
		if err != nil {
			return grantReply{}, err
		}
		return parseGrant(res)
	}, func(rs []reply[grantReply]) bool { return b.settled(tally(rs, granted)) }, linger)
	return g
}

// parseGrant reads grant.lua's {1, value}, {0, value, pttl}, {2, counter},
// {3, limit} or {5, ms left, uptime}, or sem_grant.lua's {4}.
func parseGrant(res []any) (grantReply, error) {
	if len(res) == 1 && res[0] == int64(grantQueued) {
		return grantReply{code: grantQueued}, nil
	}
	if len(res) < 2 {
		return grantReply{}, fmt.Errorf("%w: grant reply %v", errMalformed, res)
	}
	var g grantReply
	g.code, _ = res[0].(int64)
	s, _ := res[1].(string)
	switch g.code {
	case grantRestarted:
		ms, _ := res[1].(int64)
		g.pttl = time.Duration(ms) * time.Millisecond // the wait left
	case grantLimit:
		g.value = s // the key's limit there
	case grantHeld:
		g.value = s
		if len(res) > 2 {
			ms, _ := res[2].(int64)
			g.pttl = time.Duration(ms) * time.Millisecond
		}
	case grantStale:
		var err error
		if g.counter, err = parseToken(s); err != nil {
			return grantReply{}, err
		}
	}
	return g, nil
}

// staleTop is the highest counter among the masters that found the token
// too low, or 0 when none did.
func staleTop(rs []reply[grantReply]) backend.Token {
	var top backend.Token
	for _, x := range rs {
		if x.err == nil && x.v.code == grantStale {
			top = max(top, x.v.counter)
		}
	}
	return top
}

// granted makes the lease of a grant that a majority gave, unless its
// validity was spent on the way: then the grant is given back (abandon).
func (b *Backend) granted(r *request, value string, token backend.Token, start time.Time, g round, abandon func()) (attempt, error) {
	if took := time.Since(start); took >= r.o.TTL {
		abandon()
		return attempt{}, fmt.Errorf("%w: redlock %s: acquire %q: a majority granted the lock after %v, past its %v validity",
			backend.ErrUnavailable, b.url, r.key, took.Round(time.Millisecond), r.o.TTL)
	}
	l := &lease{b: b, key: r.key, names: r.names, value: value, info: r.info, token: token, ttl: r.o.TTL, px: r.px, refused: repliedWith(g.rs, grantHeld), grantedBy: repliedWith(g.rs, grantGranted),
		start: start, granted: time.Now(), minHold: r.o.MinHold, landed: g.landed}
	return attempt{lease: l}, nil
}

// repliedWith are the masters whose replies in rs have code.
func repliedWith(rs []reply[grantReply], code int64) map[*master]bool {
	m := make(map[*master]bool)
	for _, x := range rs {
		if x.err == nil && x.v.code == code {
			m[x.m] = true
		}
	}
	return m
}

// notGranted turns a grant that no majority gave into its error or the
// holder that stood in the way.
func (b *Backend) notGranted(r *request, rs []reply[grantReply]) (attempt, error) {
	if n := answered(rs); n < b.quorum {
		return attempt{}, b.noQuorum("acquire", r.key, n, errorsOf(rs))
	}
	if a, ok := b.restartBlocked(r, rs); ok {
		return a, nil
	}
	v := views{}
	for _, x := range rs {
		vw := reply[view]{m: x.m, err: x.err}
		if x.err == nil && x.v.code == grantHeld || x.err == nil && x.v.code == grantLimit {
			vw.v = view{value: x.v.value, pttl: x.v.pttl}
			v.others++
		} else if x.err == nil {
			v.mine++ // free for this run, now that its grant is given back
		}
		v.replies = append(v.replies, vw)
	}
	return b.blocked(r, v), nil
}

// abandon gives a grant that did not hold back on every master that may
// have it: it waits for those that granted it, and lets the calls to
// those that did not answer go on in the background, each after its
// grant call returned.
func (b *Backend) abandon(r *request, value string, g round) {
	rel := func(ms []*master, decided func([]reply[int64]) bool) {
		b.releaseOn(context.Background(), ms, r.names, value, 0, r.o.TTL, g.landed, decided)
	}
	abandonWith(b.masters, g, rel)
}

// abandonWith gives a grant round g that did not hold back with rel, on
// every master that may have it: see abandon.
func abandonWith(masters []*master, g round, rel func([]*master, func([]reply[int64]) bool)) {
	var must, may []*master
	for _, m := range masters {
		i := slices.IndexFunc(g.rs, func(x reply[grantReply]) bool { return x.m == m })
		switch {
		case i < 0 || g.rs[i].err != nil:
			may = append(may, m)
		case g.rs[i].v.code == grantGranted:
			must = append(must, m)
		}
	}
	rel(append(must, may...), func(done []reply[int64]) bool {
		return len(done) >= len(must) && !slices.ContainsFunc(must, func(m *master) bool {
			return !slices.ContainsFunc(done, func(x reply[int64]) bool { return x.m == m })
		})
	})
}
