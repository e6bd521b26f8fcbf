package runner

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/memory"
)

// skewedLocker hands out memory leases that report a clock skew, as a
// Redis or PostgreSQL lease measures it at the grant.
type skewedLocker struct {
	*memory.Backend
	skew time.Duration
}

type skewedLease struct {
	backend.Lease
	skew time.Duration
}

func (l skewedLease) ClockSkew() (time.Duration, bool) { return l.skew, true }

func (s skewedLocker) Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	l, err := s.Backend.Acquire(ctx, key, o)
	if err != nil {
		return nil, err
	}
	return skewedLease{l, s.skew}, nil
}

// A backend whose clock disagrees with ours by more than the safety
// margin gets one warning at the grant; one within it gets none.
func TestClockSkewBeyondTheMarginIsWarnedOnce(t *testing.T) {
	for _, c := range []struct {
		skew time.Duration
		want int
	}{{-3 * time.Second, 1}, {3 * time.Second, 1}, {20 * time.Millisecond, 0}} {
		var logs syncBuffer
		job := testJob(t, skewedLocker{memory.New(), c.skew}, "true")
		job.Log = slog.New(slog.NewTextHandler(&logs, nil))
		wantExit(t, Run(t.Context(), job), 0)
		if got := strings.Count(logs.String(), "backend_clock_ahead="); got != c.want {
			t.Errorf("skew %v (margin %v): %d clock warnings, want %d; log:\n%s", c.skew, job.Policy.Margin, got, c.want, logs.String())
		}
	}
}
