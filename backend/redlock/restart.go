package redlock

import (
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// restartBlocked is the attempt of a grant round that masters up for less
// than the restart wait kept from a majority (grantRestarted): such a
// master may have lost a copy of a lease whose holder still runs, and
// with the lease's other copies lost or out of reach too, granting would
// make two holders. The lock counts as held, by no one known, until
// enough of them have waited it out. It reports false when something else
// stood in the way, such as a master that holds another run's copy.
func (b *Backend) restartBlocked(r *request, rs []reply[grantReply]) (attempt, bool) {
	var left []time.Duration
	granted := 0
	for _, x := range rs {
		switch {
		case x.err != nil:
		case x.v.code == grantGranted:
			granted++
		case x.v.code == grantRestarted:
			left = append(left, x.v.pttl)
		case x.v.code == grantHeld:
			return attempt{}, false // a holder is known: blocked says who
		}
	}
	k := b.quorum - granted // restarted masters needed for a majority
	if k < 1 || k > len(left) {
		return attempt{}, false
	}
	slices.Sort(left)
	wait := left[k-1]
	return attempt{held: backend.Status{
		Key:  r.key,
		Held: true,
		Holder: fmt.Sprintf("no one known (%d of %d masters started less than restart_wait ago and may have lost their locks: no grant for %v)",
			len(left), len(b.masters), wait.Round(time.Millisecond)),
		TTL: wait + restartJitter(wait),
	}}, true
}

// restartJitter spreads the waiters that a restart kept out, so that they
// do not all try again at the same instant when the wait ends: the first
// is granted the lock, and the others find it held and queue for it, as
// behind any holder, rather than racing for a free lock. An eighth of the
// wait, at most maxRestartJitter: nothing wakes such a waiter sooner.
func restartJitter(wait time.Duration) time.Duration {
	return mrand.N(min(max(wait/8, time.Millisecond), maxRestartJitter))
}

// maxRestartJitter bounds restartJitter: a grant round takes a few ms, so
// a quarter second spreads a crowd, and costs a lone waiter little.
const maxRestartJitter = 250 * time.Millisecond
