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

// abstractSockets lists the abstract unix sockets named "@lockrun-..."
// that are bound on this machine (/proc/net/unix).
func abstractSockets(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 7 && strings.HasPrefix(f[len(f)-1], "@lockrun-") {
			found[f[len(f)-1]] = true
		}
	}
	return found
}

// The control socket is abstract, so nothing is left in the file system
// (a SIGKILLed lockrun used to leave its directory in /tmp). It stops
// answering before the release, and is gone after the run. A waiter
// readies it while it waits, before the grant.
func TestControlSocketAroundTheGrantAndTheRelease(t *testing.T) {
	for _, wait := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "control")
		var atAcquire map[string]bool
		var refused bool
		p := &probe{Backend: memory.New()}
		p.onAcquire = func() { atAcquire = abstractSockets(t) }
		p.onRelease = func() {
			if c, err := net.Dial("unix", controlName(t, path)); err == nil {
				c.Close()
			} else {
				refused = true
			}
		}
		job := testJob(t, p, "echo $"+EnvControl+" > "+path)
		job.Acquire.Wait = wait
		wantExit(t, Run(t.Context(), job), 0)
		sock := controlName(t, path)
		if !strings.HasPrefix(sock, "@lockrun-") {
			t.Errorf("wait %v: the control socket %q is not abstract", wait, sock)
		}
		if wait != atAcquire[sock] {
			t.Errorf("wait %v: the control socket bound when the lock was asked for: %v", wait, atAcquire[sock])
		}
		if !refused {
			t.Errorf("wait %v: the control socket still answered at the release", wait)
		}
		if abstractSockets(t)[sock] {
			t.Errorf("wait %v: the control socket %s is still bound after the run", wait, sock)
		}
	}
}

// controlName is the socket the command wrote to path.
func controlName(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	sock := strings.TrimSpace(string(b))
	if err != nil || sock == "" {
		t.Fatalf("the command's %s: %q, %v", EnvControl, b, err)
	}
	return sock
}
