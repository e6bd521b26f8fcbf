package backend

import (
	"context"
	"time"
)

// Probe's retries: about 0.6 s in all, so that a server restarting or
// electing a leader just as a cron job starts does not fail it, and one
// that stays down fails it fast.
const (
	probeAttempts = 3
	probePause    = 200 * time.Millisecond // before the second try; doubled before the third
)

// Probe calls try, which checks a backend's first connection, up to three
// times over about 0.6 s, until it succeeds, ctx ends, or final says that
// its error cannot pass by itself (bad credentials, no permission). It
// returns try's last error, or ctx's cause.
func Probe(ctx context.Context, try func(context.Context) error, final func(error) bool) error {
	pause := probePause
	for attempt := 1; ; attempt++ {
		err := try(ctx)
		if err == nil || attempt == probeAttempts || final(err) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
			pause *= 2
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
	}
}
