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

// restarted is the attempt of a grant script's {3, ms left, uptime in ms}:
// the key counts as held, by an unknown holder, until the wait is over.
func restarted(r request, res []any) attempt {
	left, _ := res[1].(int64)
	up, _ := res[2].(int64)
	wait := time.Duration(left) * time.Millisecond
	return attempt{
		held: backend.Status{
			Key:  r.key,
			Held: true,
			Holder: fmt.Sprintf("a holder from before the server's restart, maybe (the server is up for less than %v and may have lost its data; free in %v, see restart_wait)",
				time.Duration(up)*time.Millisecond+time.Second, wait),
			TTL: wait,
		},
		retry: wait,
	}
}
