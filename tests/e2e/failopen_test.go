package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// These tests run the binary with --fail-open: an outage at start lets the
// command run without the lock; contention, refusals and a loss never do.

// unreachable are backend URLs that cannot be reached, one per backend. A
// file backend is unreachable when its lock directory cannot be made or
// opened for a reason other than permission or trust: here a directory
// whose parent does not exist and cannot be created (as an unmounted
// network share), under /proc.
func unreachable(t *testing.T) map[string]string {
	p := backendtest.FreePorts(t, 7)
	return map[string]string{
		"file":      "file:///proc/lockrun-no-such-mount/locks",
		"redis":     fmt.Sprintf("redis://app:hunter2@127.0.0.1:%d/0", p[0]),
		"etcd":      fmt.Sprintf("etcd://127.0.0.1:%d", p[1]),
		"postgres":  fmt.Sprintf("postgres://postgres:hunter2@127.0.0.1:%d/postgres", p[2]),
		"zookeeper": fmt.Sprintf("zk://app:hunter2@127.0.0.1:%d", p[3]),
		"redlock":   fmt.Sprintf("redlock://:hunter2@127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/0", p[4], p[5], p[6]),
	}
}

// reportEnv is a command that prints what the fail-open contract promises
// it, then exits 3.
const reportEnv = `echo "token=[$LOCKRUN_FENCING_TOKEN] fail_open=[$LOCKRUN_FAIL_OPEN] key=[$LOCKRUN_KEY]"; exit 3`

func TestFailOpenRunsTheCommandWithoutTheLockOnEveryBackend(t *testing.T) {
	for name, url := range unreachable(t) {
		t.Run(name, func(t *testing.T) {
			closed := lockruntest.Run(t, withBackend(url), "run", "k", "--", "sh", "-c", reportEnv)
			if closed.Code != 69 || closed.Stdout != "" {
				t.Errorf("without --fail-open: exit %d, stdout %q; want 69 and no command", closed.Code, closed.Stdout)
			}
			for _, how := range [][]string{{"--fail-open"}, {"LOCKRUN_FAIL_OPEN=true"}} {
				e, args := withBackend(url), []string{"run"}
				if strings.HasPrefix(how[0], "--") {
					args = append(args, how...)
				} else {
					e = append(e, how...)
				}
				r := lockruntest.Run(t, e, append(args, "k", "--", "sh", "-c", reportEnv)...)
				if r.Code != 3 || r.Stdout != "token=[] fail_open=[1] key=[k]\n" {
					t.Errorf("%s: exit %d, stdout %q; want 3 (the command's) and an empty token with LOCKRUN_FAIL_OPEN=1", how[0], r.Code, r.Stdout)
				}
				if strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, "FAIL-OPEN") || strings.Contains(r.Stderr, "hunter2") {
					t.Errorf("%s: stderr %q; want one loud FAIL-OPEN line without the password", how[0], r.Stderr)
				}
			}
		})
	}
}

func TestFailOpenNeverRunsABusyLock(t *testing.T) {
	backends := map[string]string{"file": "file://" + t.TempDir(), "redis": redistest.Start(t).URL()}
	for name, url := range backends {
		t.Run(name, func(t *testing.T) {
			ready := filepath.Join(t.TempDir(), "ready")
			lockruntest.Start(t, withBackend(url), "run", "k", "--", "sh", "-c", "echo > "+ready+"; exec sleep 60")
			waitFile(t, ready)
			for _, args := range [][]string{{"--fail-open"}, {"--fail-open", "--timeout", "300ms"}} {
				r := lockruntest.Run(t, withBackend(url), append(append([]string{"run"}, args...), "k", "--", "echo", "ran")...)
				if r.Code != 75 || r.Stdout != "" || strings.Contains(r.Stderr, "FAIL-OPEN") {
					t.Errorf("%v on a held lock: exit %d, stdout %q, stderr %q; want 75 and no command", args, r.Code, r.Stdout, r.Stderr)
				}
			}
		})
	}
}

func TestFailOpenNeverRunsARefusedBackend(t *testing.T) {
	// /dev/null is no directory: the file backend refuses it (77), which is
	// a mistake to fix, not an outage to ride out.
	r := lockruntest.Run(t, withBackend("file:///dev/null/locks"), "run", "--fail-open", "k", "--", "echo", "ran")
	if r.Code != 77 || r.Stdout != "" || strings.Contains(r.Stderr, "FAIL-OPEN") {
		t.Errorf("refused lock directory: exit %d, stdout %q, stderr %q; want 77 and no command", r.Code, r.Stdout, r.Stderr)
	}
}

// A lock taken with --fail-open and then lost is a lost lock: the command
// is stopped and lockrun exits 76.
func TestFailOpenLostLockStillExits76(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		ready := filepath.Join(t.TempDir(), "ready")
		cmd := lockruntest.Start(t, withBackend("file://"+dir), "run", "--fail-open", "--ttl", "3s", "k", "--", "sh", "-c", "echo > "+ready+"; exec sleep 60")
		waitFile(t, ready)
		if err := os.Remove(filepath.Join(dir, "k.lock")); err != nil {
			t.Fatal(err)
		}
		if code := lockruntest.ExitCode(t, cmd); code != 76 {
			t.Errorf("lock file removed: exit %d, want 76", code)
		}
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		ready := filepath.Join(t.TempDir(), "ready")
		cmd := lockruntest.Start(t, withBackend(srv.URL()), "run", "--fail-open", "--ttl", "2s", "k", "--", "sh", "-c", "echo > "+ready+"; exec sleep 60")
		waitFile(t, ready)
		srv.Freeze()
		defer srv.Thaw()
		if code := lockruntest.ExitCode(t, cmd); code != 76 {
			t.Errorf("server frozen while the command ran: exit %d, want 76", code)
		}
	})
}

// An unlocked run handles its command as a locked one does: signals reach
// it, and lockrun exits with its status.
func TestFailOpenForwardsSignals(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	url := unreachable(t)["redis"]
	cmd := lockruntest.Start(t, withBackend(url), "run", "--fail-open", "k", "--", "sh", "-c", `trap "exit 7" TERM; echo > `+ready+`; sleep 60 & wait`)
	waitFile(t, ready)
	begin := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := lockruntest.ExitCode(t, cmd); code != 7 {
		t.Errorf("SIGTERM to lockrun: exit %d after %v, want 7 (the command's trap)", code, time.Since(begin))
	}
}

// An unlocked run keeps --max-run as a locked one does: SIGTERM, the kill
// grace, SIGKILL to the whole group, and exit 124.
func TestFailOpenHonoursMaxRun(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The group ignores SIGTERM: only the SIGKILL after the grace ends it.
	cmd := start(t, withBackend(unreachable(t)["redis"]), "run", "--fail-open", "--max-run", "1", "--kill-grace", "500ms",
		"k", "--", "sh", "-c", stubbornGroup(pidFile, "while :; do sleep 0.05; done"))
	pids := pidsFrom(t, pidFile) // the command runs: the clock of --max-run started
	code, took := waitExit(t, cmd, 10*time.Second)
	if code != 124 {
		t.Fatalf("exit %d, want 124 (--max-run)", code)
	}
	if took < 1400*time.Millisecond || took > 4*time.Second {
		t.Errorf("lockrun exited %v after the command started; want --max-run 1s plus the 500ms grace", took)
	}
	waitDead(t, pids, 100*time.Millisecond)
}

// The watchdog guards an unlocked command too: a lockrun frozen past
// --max-run does not let the command run on, and a SIGKILLed lockrun
// takes the command's whole group with it.
func TestFailOpenWatchdogGuardsTheCommand(t *testing.T) {
	url := unreachable(t)["redis"]
	t.Run("frozen past max-run", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pids")
		// --ttl 3s: a 150ms margin, so the watchdog's backstop is 75ms.
		cmd := start(t, withBackend(url), "run", "--fail-open", "--ttl", "3s", "--max-run", "1s", "--kill-grace", "300ms",
			"k", "--", "sh", "-c", "sleep 30 & echo $$ $! > "+pidFile+"; wait")
		pids := pidsFrom(t, pidFile)
		begin := time.Now()
		cmd.Process.Signal(syscall.SIGSTOP)
		defer cmd.Process.Signal(syscall.SIGCONT)
		// Due 1.375s after the start; the rest is room for a loaded host.
		if took := waitDead(t, pids, 10*time.Second); took > 5*time.Second {
			t.Errorf("the command died %v after lockrun froze; --max-run 1s, grace 300ms", took)
		}
		t.Logf("command dead %v after lockrun froze", time.Since(begin).Round(time.Millisecond))
		cmd.Process.Signal(syscall.SIGCONT)
		if code, _ := waitExit(t, cmd, 10*time.Second); code == 0 {
			t.Error("lockrun exited 0 for a command its watchdog killed")
		}
	})
	t.Run("SIGKILL", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "pids")
		cmd := start(t, withBackend(url), "run", "--fail-open", "k", "--", "sh", "-c", "sleep 30 & echo $$ $! > "+pidFile+"; wait")
		pids := pidsFrom(t, pidFile)
		cmd.Process.Kill()
		cmd.Wait()
		waitDead(t, pids, 2*time.Second)
	})
}

// A command run without the lock has no token: a fence check and a
// checkpoint are refused as for a lost lock (76), saying why.
func TestFailOpenRefusesFenceChecksAndCheckpoints(t *testing.T) {
	bin := lockruntest.Binary(t)
	script := bin + " fence check; echo fence=$?; " + bin + " checkpoint get; echo checkpoint=$?"
	r := run(t, withBackend(unreachable(t)["redis"]), "run", "--fail-open", "k", "--", "sh", "-c", script)
	if r.Stdout != "fence=76\ncheckpoint=76\n" || strings.Count(r.Stderr, "WITHOUT the lock (--fail-open)") != 2 {
		t.Errorf("fence check and checkpoint get under --fail-open: stdout %q, stderr %q; want both refused with 76, saying why", r.Stdout, r.Stderr)
	}
}
