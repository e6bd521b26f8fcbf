package watchdog

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/procfs"
)

// startTree starts sh with n sleeping children, in a session of its own,
// and waits until all are there.
func startTree(t testing.TB, n int, env ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command("sh", "-c", "for i in $(seq "+strconv.Itoa(n)+"); do sleep 60 & done; wait")
	c.Env = append(os.Environ(), env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL); c.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if kids, _ := procfs.Children(c.Process.Pid); len(kids) == n {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d children did not start", n)
		}
	}
}

// What refresh saw, and what it forked after, dies by kill.
func TestTreeKillReachesWhatForkedAfterTheRefresh(t *testing.T) {
	dir := t.TempDir()
	c := exec.Command("sh", "-c", "while [ ! -e "+dir+"/go ]; do sleep .01; done; setsid sleep 60 & echo $! > "+dir+"/late; wait")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Wait()
	seen := refresh(os.Getpid())
	if !seen[identify(t, c.Process.Pid)] {
		t.Fatalf("refresh missed the child %d: %v", c.Process.Pid, seen)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o600)
	var late int
	for deadline := time.Now().Add(10 * time.Second); late == 0; time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(dir, "late"))
		late, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		if time.Now().After(deadline) {
			t.Fatal("no late child")
		}
	}
	defer syscall.Kill(late, syscall.SIGKILL)
	if n := seen.kill(); n != 2 {
		t.Errorf("kill got %d processes, want the child and its late one", n)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(late); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the late child survived")
		}
	}
}

// A pid whose start time is not the one seen is never signalled.
func TestTreeKillSparesAnotherProcessOnTheSamePid(t *testing.T) {
	c := startTree(t, 1)
	id := identify(t, c.Process.Pid)
	id.Start--
	if n := (tree{id: true}).kill(); n != 0 || !alive(c.Process.Pid) {
		t.Errorf("killed %d; a process with another start time was signalled", n)
	}
}

func TestKillByRunIDKillsCarriersOnly(t *testing.T) {
	mine := startTree(t, 3, "LOCKRUN_RUN_ID=run-a")
	other := startTree(t, 1, "LOCKRUN_RUN_ID=run-ab")
	if n := killByRunID("run-a"); n != 4 {
		t.Errorf("killed %d, want the shell and its 3 children", n)
	}
	for deadline := time.Now().Add(5 * time.Second); alive(mine.Process.Pid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a carrier survived")
		}
	}
	if !alive(other.Process.Pid) {
		t.Error("another run's process was killed")
	}
}

func identify(t testing.TB, pid int) procfs.Identity {
	id, _, ok := procfs.Identify(pid)
	if !ok {
		t.Fatalf("no process %d", pid)
	}
	return id
}

// The refresh runs on every deadline message: its cost with a few and with
// many processes in lockrun's tree.
func BenchmarkRefresh(b *testing.B) {
	for _, n := range []int{5, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			startTree(b, n)
			b.ResetTimer()
			for b.Loop() {
				refresh(os.Getpid())
			}
		})
	}
}

// The scan of every process's environment that follows a kill, finding
// none: its cost on this machine (its process count logged).
func BenchmarkRunIDScan(b *testing.B) {
	entries, _ := os.ReadDir("/proc")
	b.Logf("%d /proc entries", len(entries))
	for b.Loop() {
		killByRunID("no-such-run")
	}
}
