package runner

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/backend/file"
	"github.com/lockrun/lockrun/internal/procfs"
)

// startedLease is a real lease that counts the Started calls and notes
// whether the command ran when the first came.
type startedLease struct {
	backend.Lease
	calls atomic.Int32
	ran   atomic.Bool
}

func (l *startedLease) Started() {
	if l.calls.Add(1) > 1 {
		return
	}
	kids, _ := procfs.Children(os.Getpid())
	for _, pid := range kids {
		comm, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		if strings.TrimSpace(string(comm)) == "sleep" {
			l.ran.Store(true)
		}
	}
}

// A lease that leaves work for after the grant is told once, when its
// command runs, and never for a command that could not start.
func TestStartedComesOnceTheCommandRuns(t *testing.T) {
	b, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		calls      int32
		want       any
	}{{"runs", "/bin/sleep", 1, 0}, {"cannot start", "/etc/passwd", 0, ErrCannotExec}} {
		t.Run(tc.name, func(t *testing.T) {
			sl := &startedLease{}
			job := testJob(t, nil, "")
			job.Path, job.Args = tc.path, []string{"sleep", "0.2"}
			job.Locker = locker(func(ctx context.Context) (backend.Lease, error) {
				l, err := b.Acquire(ctx, "job", job.Acquire)
				sl.Lease = l
				return sl, err
			})
			wantExit(t, Run(t.Context(), job), tc.want)
			if n := sl.calls.Load(); n != tc.calls {
				t.Errorf("Started called %d times, want %d", n, tc.calls)
			}
			if tc.calls > 0 && !sl.ran.Load() {
				t.Error("Started came before the command ran")
			}
		})
	}
}
