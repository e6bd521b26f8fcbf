package redlock

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// lease is one grant of a lock, known by the exact value it wrote on a
// majority of the masters: the scripts change the lock on a master only
// while it holds that value.
type lease struct {
	b         *Backend
	key       string
	names     names
	value     string
	info      string // the holder's record, JSON, for a master that renew.lua takes
	token     backend.Token
	ttl       time.Duration // the validity left after the drift margin
	px        int64         // ms asked of each master
	start     time.Time     // before the first request of the acquire
	granted   time.Time     // after a majority's grants came back
	minHold   time.Duration
	landed    map[*master]chan struct{} // see round
	refused   map[*master]bool          // masters whose refusal of the grant its round heard
	grantedBy map[*master]bool          // masters whose grant its round heard
}

// Token is the fencing token of this grant.
func (l *lease) Token() backend.Token { return l.token }

// TTL is the TTL asked for: each master was asked for it plus the drift
// margin, so that much validity is left counted from Start.
func (l *lease) TTL() time.Duration { return l.ttl }

// Start is the local time just before the acquire's first request.
func (l *lease) Start() time.Time { return l.start }

// Renew extends the lock by its TTL on every master that still holds this
// lease's value, and takes it back on a master that refused this lease's
// grant once the lock is free there (lua/renew.lua). It succeeds when a
// majority did; it returns an error wrapping backend.ErrLost when too
// many masters hold something else for a majority, and
// backend.ErrUnavailable when too few answered to tell.
func (l *lease) Renew(ctx context.Context) error {
	keys := append(l.names.endedKeys(l.names.lock, l.names.record), l.names.sem[0])
	var lost atomic.Bool // a master that granted the lease no longer has it
	decided := make(chan struct{})
	defer close(decided)
	rs := fanout(ctx, l.b.masters, func(ctx context.Context, m *master) (int64, error) {
		if !l.refused[m] {
			n, err := l.renewOn(ctx, m, keys, "0")
			if err == nil && n == 0 && l.grantedBy[m] {
				lost.Store(true)
			}
			return n, err
		}
		return l.takeBack(ctx, m, keys, &lost, decided)
	}, func(rs []reply[int64]) bool { return l.b.settled(tally(rs, renewed)) })
	return l.outcomeOf("renew", rs, renewed)
}

// takeBack renews on a master that refused the lease's grant, and while
// the lock is still another's there, tries again every little while, for
// as long as an acquire's round may last: a grant that no majority gave
// is given back soon. It stops once the round is decided without it, or
// once a master that granted the lease says it lost it there (lost): the
// round then cannot be decided by waiting.
func (l *lease) takeBack(ctx context.Context, m *master, keys []string, lost *atomic.Bool, decided <-chan struct{}) (int64, error) {
	pause := min(max(l.ttl/20, 5*time.Millisecond), 50*time.Millisecond)
	until := time.Now().Add(l.b.callTimeout(l.ttl))
	for {
		n, err := l.renewOn(ctx, m, keys, "1")
		if err != nil || n != 0 {
			return n, err // 3, free but not to be taken: nothing to wait for
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return n, nil
		case <-decided:
			t.Stop()
			return n, nil
		}
		if lost.Load() || time.Now().After(until) {
			return n, nil
		}
	}
}

// renewOn runs renew.lua on m; take is "1" where the lease may take the
// lock back.
func (l *lease) renewOn(ctx context.Context, m *master, keys []string, take string) (int64, error) {
	return l.b.scripts.renew.Run(ctx, m.client, keys, l.value, l.px, l.token.String(), l.info, take).Int64()
}

// Release gives the lock up on every master that holds this lease's value
// and wakes the next waiter; with a minimum hold it leaves the lock to
// expire at the grant plus MinHold instead. It waits a little for masters
// slower than a majority; calls to those that still do not answer go on
// in the background. Its errors are Renew's; a revoked lease is freed at
// once, minimum hold or not, and returns an error wrapping ErrLost.
func (l *lease) Release(ctx context.Context) error {
	var keep int64
	if left := l.minHold - time.Since(l.granted); left > 0 {
		keep = millis(left)
	}
	return l.release(ctx, keep)
}

// GiveBack gives the lock up at once, minimum hold or not, on every master
// that holds this lease's value, and wakes the next waiter. Its errors
// are Renew's.
func (l *lease) GiveBack(ctx context.Context) error { return l.release(ctx, 0) }

// release runs release.lua on every master, leaving the lock to expire in
// keep ms (0: now).
func (l *lease) release(ctx context.Context, keep int64) error {
	rs := l.b.releaseOn(ctx, l.b.masters, l.names, l.value, keep, l.ttl, l.landed, func(rs []reply[int64]) bool {
		return l.b.settled(tally(rs, freed))
	})
	return l.releaseOutcome(rs)
}

func ours(n int64) bool { return n == 1 }

// renewed tells renew.lua's replies that keep the lease on their master:
// extended (1) or taken (2).
func renewed(n int64) bool { return n == 1 || n == 2 }

// outcome turns the masters' answers to a renewal into its error.
func (l *lease) outcome(op string, rs []reply[int64]) error { return l.outcomeOf(op, rs, ours) }

// outcomeOf is outcome, with ok telling the answers that succeeded.
func (l *lease) outcomeOf(op string, rs []reply[int64], ok func(int64) bool) error {
	yes, no, _ := tally(rs, ok)
	switch {
	case yes >= l.b.quorum:
		return nil
	case no > len(l.b.masters)-l.b.quorum:
		return fmt.Errorf("%w: lock %q on redlock %s expired or was taken over on %d of %d masters (token %s)",
			backend.ErrLost, l.key, l.b.url, no, len(l.b.masters), l.token)
	}
	return l.b.noQuorum(op, l.key, answered(rs), errorsOf(rs))
}

// releaseOn runs release.lua for value on the masters ms, each call by
// ctx's deadline and the read timeout, but not cancelled with ctx (a
// lockrun that gives up still cleans up while it lives), and only once the
// grant call to that master returned (landed), until decided and a
// little more (linger) for the last masters.
func (b *Backend) releaseOn(ctx context.Context, ms []*master, n names, value string, keep int64, ttl time.Duration, landed map[*master]chan struct{}, decided func([]reply[int64]) bool) []reply[int64] {
	keys := n.endedKeys(n.lock, n.queue, n.record)
	px := millis(ttl) + millis(drift(ttl))
	return b.releaseWith(ctx, ms, ttl, landed, decided, func(ctx context.Context, m *master) (int64, error) {
		return b.scripts.release.Run(ctx, m.client, keys, value, n.wake, keep, px).Int64()
	})
}

// releaseWith runs call, a release script's, on the masters ms as
// releaseOn says.
func (b *Backend) releaseWith(ctx context.Context, ms []*master, ttl time.Duration, landed map[*master]chan struct{}, decided func([]reply[int64]) bool, call func(context.Context, *master) (int64, error)) []reply[int64] {
	ctx, stop := detached(ctx, b.opt.ReadTimeout)
	defer stop()
	// Lingering for the last masters matters: lockrun exits right after
	// the release, and a copy left on a master would keep the lock taken
	// (see peek) until it expires.
	return fanoutLinger(ctx, ms, func(ctx context.Context, m *master) (int64, error) {
		if c := landed[m]; c != nil {
			select {
			case <-c:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return call(ctx, m)
	}, decided, b.linger(ttl))
}

// runOf is the run id in a lock value, or "" when it has none.
func runOf(value string) string {
	parts := strings.SplitN(value, " ", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[1]
}
