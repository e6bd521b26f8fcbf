package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// TestKazooSemaphoreDoesNotExcludeLockrun pins down what the docs say of
// kazoo's Semaphore on a lockrun semaphore's path (one kazoo created, as
// kazoo 2.8 fails on a lock node without data, as lockrun creates it): it
// counts lockrun's nodes as leases, but lockrun does not see kazoo's
// (they are not sequential), so the two let more in than the limit.
func TestKazooSemaphoreDoesNotExcludeLockrun(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import kazoo").Run(); err != nil {
		t.Fatalf("python3-kazoo not installed (%v): run .ci/services.sh (apt-get install python3-kazoo)", err)
	}
	srv := zktest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	got, done := kazooLease(t, srv.Addr(), DefaultRoot+"/"+key, 2)
	if got != "acquired" {
		done()
		t.Fatalf("kazoo Semaphore(2) on a fresh path: %q, want acquired", got)
	}
	var held []backend.Lease
	for i := range 2 {
		l, err := b.Acquire(t.Context(), key, semOpts(fmt.Sprint("h", i), 2, false))
		if err != nil {
			t.Fatalf("lockrun holder %d beside a kazoo lease: %v; lockrun is not expected to see kazoo's lease", i, err)
		}
		held = append(held, l)
	}
	done() // three were inside a limit of two
	got, done = kazooLease(t, srv.Addr(), DefaultRoot+"/"+key, 2)
	done()
	if got != "busy" {
		t.Errorf("kazoo Semaphore(2) beside two lockrun holders: %q, want busy (it counts lockrun's nodes)", got)
	}
	for _, l := range held {
		_ = l.Release(t.Context())
	}
}

// kazooLease runs testdata/zksem.py: its answer ("acquired" or "busy"),
// and the func that ends it, releasing a lease it holds.
func kazooLease(t *testing.T, hosts, path string, leases int) (string, func()) {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", "testdata/zksem.py", hosts, path, strconv.Itoa(leases))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 16)
	n, _ := out.Read(line)
	if n == 0 {
		_ = cmd.Wait()
		t.Fatalf("zksem.py: %s", stderr.String())
	}
	return strings.TrimSpace(string(line[:n])), func() { in.Close(); _ = cmd.Wait() }
}
