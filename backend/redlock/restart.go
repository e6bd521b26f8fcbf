package redlock

import (
	"fmt"
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
// stood in the way.
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
		TTL: wait,
	}}, true
}
