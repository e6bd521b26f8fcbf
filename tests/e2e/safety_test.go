package e2e_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/procfs"
)

// Binary-level tests of the safety core: no command starts late, none runs
// unguarded, a blocked stderr costs no safety, --max-run.

// waitState waits until pid's /proc state is one of states.
func waitState(t *testing.T, pid int, states string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if s := state(pid); s != "" && strings.Contains(states, s) {
			return
		}
	}
	t.Fatalf("process %d never reached state %q (now %q)", pid, states, state(pid))
}

// waitExit waits at most within for cmd to end, and returns its status
// (-1 for a death by signal) and how long that took.
func waitExit(t *testing.T, cmd *exec.Cmd, within time.Duration) (int, time.Duration) {
	t.Helper()
	begin := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return cmd.ProcessState.ExitCode(), time.Since(begin)
	case <-time.After(within):
		cmd.Process.Kill()
		<-done
		t.Fatalf("lockrun did not exit within %v", within)
		return 0, 0
	}
}

// A lockrun frozen at the latest point between the grant and the exec
// (the test hook), for longer than the lease, must never start the command
// when it wakes: its term deadline has passed, and another holder may
// have the lock. The watchdog holds that deadline and kills lockrun.
func TestFreezeBeforeExecNeverStartsTheCommandLate(t *testing.T) {
	bin := lockruntest.BuildTags(t, "cmd/lockrun", "testhooks")
	e, dir := env(t), t.TempDir()
	marker := filepath.Join(dir, "ran")
	cmd := exec.Command(bin, "run", "--ttl", "1s", "k", "--", "sh", "-c", "echo ran > "+marker)
	cmd.Env, cmd.Stderr = append(e, "LOCKRUN_TESTHOOK=freeze-before-exec"), os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	waitState(t, cmd.Process.Pid, "T")               // frozen by the hook
	time.Sleep(1500 * time.Millisecond)              // past the 1s lease
	if r := run(t, e, "release", "k"); r.Code != 0 { // as another holder's grant would
		t.Logf("release: %d %s", r.Code, r.Stderr)
	}
	cmd.Process.Signal(syscall.SIGCONT)
	code, _ := waitExit(t, cmd, 10*time.Second)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran after lockrun woke past its term deadline")
	}
	if code == 0 {
		t.Error("lockrun exited 0 without running the command")
	}
	if r := run(t, e, "run", "k", "--", "true"); r.Code != 0 {
		t.Errorf("the lock is not free after the frozen run: %d %s", r.Code, r.Stderr)
	}
}

// watchdogOf finds lockrun's watchdog among its children.
func watchdogOf(t *testing.T, lockrun int) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		kids, _ := procfs.Children(lockrun)
		for _, pid := range kids {
			if _, ok := lockruntest.WatchdogArgs(pid); ok {
				return pid
			}
		}
	}
	t.Fatal("lockrun has no watchdog")
	return 0
}

// A watchdog that dies while the command runs (the OOM killer, an
// operator) leaves the command unguarded against a freeze of lockrun:
// lockrun stops the command within the kill grace and exits 76, saying
// why.
func TestWatchdogDeathStopsTheCommand(t *testing.T) {
	e, pidFile := env(t), filepath.Join(t.TempDir(), "pid")
	var stderr bytes.Buffer
	cmd := exec.Command(lockruntest.Binary(t), "run", "--ttl", "6s", "--kill-grace", "1s", "k", "--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 30")
	cmd.Env, cmd.Stderr = e, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	pids := pidsFrom(t, pidFile)
	syscall.Kill(watchdogOf(t, cmd.Process.Pid), syscall.SIGKILL)
	code, took := waitExit(t, cmd, 5*time.Second)
	if code != 76 {
		t.Errorf("lockrun exited %d after its watchdog died, want 76; stderr:\n%s", code, stderr.String())
	}
	if took > 2*time.Second {
		t.Errorf("the command was stopped %v after the watchdog died; the kill grace is 1s", took)
	}
	waitDead(t, pids, 100*time.Millisecond)
	if !strings.Contains(stderr.String(), "watchdog") {
		t.Errorf("lockrun did not say the watchdog died:\n%s", stderr.String())
	}
}

// A stderr whose reader is alive but never reads must not delay the kill
// sequence: after a forced release the command dies at once (SIGTERM,
// its grace not needed), not at the watchdog's backstop, and lockrun
// exits rather than hang on its last lines.
func TestBlockedStderrDoesNotDelayTheKill(t *testing.T) {
	e, pidFile := env(t), filepath.Join(t.TempDir(), "pid")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	fd := int(w.Fd()) // once: Fd makes the descriptor blocking again
	syscall.SetNonblock(fd, true)
	for { // fill the pipe: every write on it blocks from now on
		if _, err := syscall.Write(fd, make([]byte, 4096)); err != nil {
			break
		}
	}
	syscall.SetNonblock(fd, false)
	cmd := exec.Command(lockruntest.Binary(t), "run", "--ttl", "5s", "--heartbeat", "200ms", "--kill-grace", "1s", "k", "--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 30")
	cmd.Env, cmd.Stderr = e, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	pids := pidsFrom(t, pidFile)
	if res := run(t, e, "release", "k"); res.Code != 0 {
		t.Fatalf("release: %d %s", res.Code, res.Stderr)
	}
	released := time.Now()
	if took := waitDead(t, pids, 4*time.Second); took > 1200*time.Millisecond {
		t.Errorf("the command died %v after the release; the heartbeat is 200ms and SIGTERM kills it", took)
	}
	code, _ := waitExit(t, cmd, 3*time.Second)
	if code != 76 {
		t.Errorf("lockrun exited %d, want 76 (lost)", code)
	}
	t.Logf("command dead and lockrun gone %v after the release", time.Since(released).Round(time.Millisecond))
}

// --max-run stops the command as a lost lock does (SIGTERM, the kill
// grace, SIGKILL) and exits 124 as timeout(1) does; a bare number is
// seconds, and LOCKRUN_MAX_RUN sets it too.
func TestMaxRunStopsTheCommandAndExits124(t *testing.T) {
	e, pidFile := env(t), filepath.Join(t.TempDir(), "pid")
	begin := time.Now()
	// The group ignores SIGTERM: only the SIGKILL after the grace ends it.
	res := run(t, e, "run", "--max-run", "1", "--kill-grace", "500ms", "k", "--", "sh", "-c", stubbornGroup(pidFile, "while :; do sleep 0.05; done"))
	took := time.Since(begin)
	if res.Code != 124 {
		t.Fatalf("exit %d, want 124; stderr:\n%s", res.Code, res.Stderr)
	}
	if took < 1500*time.Millisecond || took > 4*time.Second {
		t.Errorf("run took %v; want --max-run 1s plus the 500ms grace", took)
	}
	waitDead(t, pidsFrom(t, pidFile), 100*time.Millisecond)
	if !strings.Contains(res.Stderr, "max") {
		t.Errorf("stderr does not say why the command was stopped:\n%s", res.Stderr)
	}
	begin = time.Now()
	res = run(t, append(e, "LOCKRUN_MAX_RUN=300ms"), "run", "k", "--", "sleep", "30")
	if res.Code != 124 || time.Since(begin) > 3*time.Second {
		t.Errorf("LOCKRUN_MAX_RUN=300ms: exit %d after %v, want 124 within seconds", res.Code, time.Since(begin))
	}
	if res := run(t, e, "run", "--max-run", "5", "k", "--", "true"); res.Code != 0 {
		t.Errorf("a command within its --max-run: exit %d, want 0; %s", res.Code, res.Stderr)
	}
	if res := run(t, e, "run", "--max-run", "soon", "k", "--", "true"); res.Code != 64 || strings.Count(res.Stderr, "\n") != 1 {
		t.Errorf("--max-run soon: exit %d, %q; want 64 and one line", res.Code, res.Stderr)
	}
}
