package runner

import (
	"context"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/backend/file"
)

// lateLease is a real lease whose grant looks a TTL old, as one whose
// reply came too late to use; it gives back through the real lease.
type lateLease struct{ backend.Lease }

func (l lateLease) Start() time.Time                   { return time.Now().Add(-l.TTL()) }
func (l lateLease) GiveBack(ctx context.Context) error { return backend.GiveBack(ctx, l.Lease) }

// A lease the command never used keeps no minimum hold: on a fleet every
// other host would skip a schedule that nobody ran. The file backend
// records the hold at the grant, so a plain Release would keep it.
func TestUnusedLeasesKeepNoMinHold(t *testing.T) {
	b, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("granted too late", func(t *testing.T) {
		job := testJob(t, nil, "true")
		job.Acquire.MinHold = time.Minute
		job.Locker = locker(func(ctx context.Context) (backend.Lease, error) {
			l, err := b.Acquire(ctx, "job", job.Acquire)
			if err != nil {
				return nil, err // held: the last late lease kept its hold
			}
			return lateLease{l}, nil
		})
		wantExit(t, Run(t.Context(), job), backend.ErrUnavailable)
		assertFree(t, b, "job")
	})
	t.Run("cannot start", func(t *testing.T) {
		job := testJob(t, b, "")
		job.Acquire.MinHold = time.Minute
		job.Path, job.Args = "/etc/passwd", []string{"/etc/passwd"}
		wantExit(t, Run(t.Context(), job), ErrCannotExec)
		assertFree(t, b, "job")
	})
}
