package redis

import (
	"fmt"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// grantRestarted is the first element of a grant script's reply when the
// lock is free but the server started too lately to grant it: a lock
// taken before the start may have been lost with the server's data while
// its holder still runs (restart_left in lua/lib.lua).
const grantRestarted = 3

// restartMS is the restart wait of a run with options o, in ms (see
// RestartMS).
func (b *Backend) restartMS(o backend.AcquireOptions) int64 { return RestartMS(b.restartWait, o) }

// restarted is the attempt of a grant script's {3, ms left, uptime in s}:
// the key counts as held, by no one known, until the wait is over.
func restarted(r request, res []any) attempt {
	left, _ := res[1].(int64)
	up, _ := res[2].(int64)
	wait := time.Duration(left) * time.Millisecond
	return attempt{
		held: backend.Status{
			Key:  r.key,
			Held: true,
			Holder: fmt.Sprintf("no one known (the server started about %v ago and may have lost its locks: no grant for %v, see restart_wait)",
				time.Duration(up)*time.Second, wait),
			TTL: wait,
		},
		retry: wait,
	}
}
