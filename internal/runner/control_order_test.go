package runner

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/memory"
)

// probe is a memory backend that calls onAcquire before each Acquire and
// onRelease before each Release of a lease it granted.
type probe struct {
	*memory.Backend
	onAcquire, onRelease func()
}

func (p *probe) Acquire(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	p.onAcquire()
	l, err := p.Backend.Acquire(ctx, key, o)
	if err != nil {
		return nil, err
	}
	return &probedLease{Lease: l, onRelease: p.onRelease}, nil
}

type probedLease struct {
	backend.Lease
	onRelease func()
}

func (l *probedLease) Release(ctx context.Context) error {
	l.onRelease()
	return l.Lease.Release(ctx)
}

// controlDirs lists the control sockets' directories under dir.
func controlDirs(t *testing.T, dir string) []string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(dir, "lockrun-*"))
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// The control socket stops answering before the release, and its
// directory is removed only after it, off the hand-off path. A waiter
// readies the socket while it waits, before the grant.
func TestControlSocketAroundTheGrantAndTheRelease(t *testing.T) {
	for _, wait := range []bool{false, true} {
		tmp := t.TempDir()
		t.Setenv("TMPDIR", tmp)
		path := filepath.Join(t.TempDir(), "control")
		var atAcquire []string
		var refused, kept bool
		p := &probe{Backend: memory.New()}
		p.onAcquire = func() { atAcquire = controlDirs(t, tmp) }
		p.onRelease = func() {
			b, err := os.ReadFile(path)
			sock := strings.TrimSpace(string(b))
			if err != nil || sock == "" {
				t.Errorf("the command's %s: %q, %v", EnvControl, b, err)
				return
			}
			if c, err := net.Dial("unix", sock); err == nil {
				c.Close()
			} else {
				refused = true
			}
			_, err = os.Stat(filepath.Dir(sock))
			kept = err == nil
		}
		job := testJob(t, p, "echo $"+EnvControl+" > "+path)
		job.Acquire.Wait = wait
		wantExit(t, Run(t.Context(), job), 0)
		if wait != (len(atAcquire) == 1) {
			t.Errorf("wait %v: control directories when the lock was asked for: %v", wait, atAcquire)
		}
		if !refused {
			t.Errorf("wait %v: the control socket still answered at the release", wait)
		}
		if !kept {
			t.Errorf("wait %v: the control directory was removed before the release", wait)
		}
		if left := controlDirs(t, tmp); len(left) != 0 {
			t.Errorf("wait %v: control directories after the run: %v", wait, left)
		}
	}
}
