package zookeeper

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/zktest"
)

// TestKazooLockAndLockrunExcludeEachOther runs a real second client on the
// same lock path: Python's kazoo Lock (told that "-lock-" nodes contend,
// as Curator's do) and lockrun wait for each other, both ways.
func TestKazooLockAndLockrunExcludeEachOther(t *testing.T) {
	srv := zktest.Start(t)
	b, key, dir := openTest(t, srv.URL()), backendtest.Key(t), t.TempDir()
	kazoo := zktest.KazooLock(t, srv.Addr(), DefaultRoot+"/"+key)
	ready, proceed := filepath.Join(dir, "ready"), filepath.Join(dir, "go")
	holder := exec.Command(kazoo[0], append(kazoo[1:], "--", "sh", "-c", "echo > "+ready+"; while [ ! -e "+proceed+" ]; do sleep 0.02; done")...)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Process.Kill()
	waitFile(t, ready)
	if _, err := b.Acquire(t.Context(), key, opts("alice", false)); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("Acquire while kazoo holds = %v, want ErrHeld", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	got := make(chan backend.Lease, 1)
	go func() {
		l, err := b.Acquire(ctx, key, opts("bob", true))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("lockrun took the lock while kazoo held it")
	default:
	}
	if err := os.WriteFile(proceed, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := holder.Wait(); err != nil {
		t.Fatalf("kazoo holder: %v", err)
	}
	l := <-got
	if l == nil {
		return
	}
	// Now lockrun holds: kazoo gives up after its timeout.
	if code := runKazoo(t, kazoo, "0.5"); code != 75 {
		t.Errorf("kazoo Lock while lockrun holds: exit %d, want 75 (timed out)", code)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code := runKazoo(t, kazoo, "5"); code != 0 {
		t.Errorf("kazoo Lock after lockrun released: exit %d, want 0", code)
	}
}

func runKazoo(t *testing.T, kazoo []string, timeout string) int {
	t.Helper()
	cmd := exec.Command(kazoo[0], append(kazoo[1:], timeout, "--", "true")...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kazoo: %v: %s", err, out)
	}
	return 0
}

// waitFile waits up to 10 s for path to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%s did not appear: %v", path, err)
		}
	}
}
