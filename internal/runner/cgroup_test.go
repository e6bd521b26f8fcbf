package runner

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/lockrun/lockrun/internal/memory"
	"github.com/lockrun/lockrun/internal/procfs"
)

// syncBuffer is a log sink for tests.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func needCgroups(t *testing.T) {
	t.Helper()
	cg, err := newCgroup()
	if err != nil {
		t.Skipf("no cgroup to test with: %v (CI runs as root)", err)
	}
	cg.remove()
}

// A command that cannot be contained in a cgroup is reported, once, where
// lockrun could have made one.
func TestAnUncontainedCommandIsReportedOnce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("an unprivileged run reports it with -v only")
	}
	defer func(f func() (*cgroup, error)) { makeCgroup = f }(makeCgroup)
	makeCgroup = func() (*cgroup, error) { return nil, errors.New("no cgroup v2 hierarchy") }
	var logs syncBuffer
	job := testJob(t, memory.New(), "true")
	job.Log = slog.New(slog.NewTextHandler(&logs, nil))
	wantExit(t, Run(t.Context(), job), 0)
	if n := strings.Count(logs.String(), "not contained in a cgroup"); n != 1 {
		t.Errorf("%d warnings of an uncontained command, want 1:\n%s", n, logs.String())
	}
}

// A kernel that refuses clone3 (or CLONE_INTO_CGROUP) gets the command
// started without its cgroup, and says so; any other failure to start in
// the cgroup (a cgroup removed meanwhile) is final, never a silent start
// outside it.
func TestCgroupStartFallsBackOnlyWhenTheKernelRefusesClone3(t *testing.T) {
	needCgroups(t)
	defer func(f func(string, []string, *os.ProcAttr) (int, error)) { startProcess = f }(startProcess)
	for _, c := range []struct {
		errno   syscall.Errno
		started bool
	}{{syscall.ENOSYS, true}, {syscall.ENODEV, false}, {syscall.ENOENT, false}} {
		startProcess = func(path string, argv []string, attr *os.ProcAttr) (int, error) {
			if attr.Sys.UseCgroupFD {
				return 0, &os.PathError{Op: "fork/exec", Path: path, Err: c.errno}
			}
			return procfs.Start(path, argv, attr)
		}
		var logs syncBuffer
		marker := filepath.Join(t.TempDir(), "ran")
		job := testJob(t, memory.New(), "touch "+marker)
		job.Log = slog.New(slog.NewTextHandler(&logs, nil))
		err := Run(t.Context(), job)
		_, statErr := os.Stat(marker)
		switch ran := statErr == nil; {
		case c.started && (err != nil || !ran):
			t.Errorf("%v from clone3: Run = %v, ran %v; want the command run without a cgroup", c.errno, err, ran)
		case c.started && !strings.Contains(logs.String(), "not contained in a cgroup"):
			t.Errorf("%v from clone3: the command ran uncontained and nothing said so:\n%s", c.errno, logs.String())
		case !c.started && (err == nil || ran):
			t.Errorf("%v from a start in the cgroup: Run = %v, ran %v; want no start outside it", c.errno, err, ran)
		}
	}
}
