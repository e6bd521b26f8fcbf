package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/clock"
)

// doneLease is a lease that can tell at once that it is lost (as the file
// backend's does when its lock file is removed): Done closes, and the
// renewal that follows reports ErrLost.
type doneLease struct {
	done chan struct{}
}

func (d *doneLease) Done() <-chan struct{} { return d.done }

func (d *doneLease) Renew(ctx context.Context) error {
	select {
	case <-d.done:
		return fmt.Errorf("%w: lock file removed", backend.ErrLost)
	default:
		return nil
	}
}

func TestALeaseThatSaysItIsLostIsLostAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := testPolicy(t) // 1 s heartbeat
		lease := &doneLease{done: make(chan struct{})}
		k := Start(t.Context(), lease, p, time.Now(), WithClock(clock.Runtime))
		defer k.Stop()
		time.Sleep(1500 * time.Millisecond)
		close(lease.done)
		closed := time.Now()
		at := lostAt(t, k, 5*time.Second)
		if at.Sub(closed) != 0 || !errors.Is(k.Err(), backend.ErrLost) {
			t.Errorf("lost %v after Done closed (%v), want at once, not at the next heartbeat", at.Sub(closed), k.Err())
		}
	})
}
