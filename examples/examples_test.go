// Package examples holds runnable examples of lockrun in cron, CI, systemd
// and a fenced backfill; this test runs each one as written.
package examples

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/cmd/lockrun/lockruntest"
)

// shell runs a command line from the repository root, with lockrun on PATH
// and the test's own lock directory.
func shell(t *testing.T, locks, line string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", line, "sh"}, args...)...)
	cmd.Dir = ".."
	binDir := filepath.Dir(lockruntest.Binary(t))
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"), "LOCKRUN_BACKEND=file://"+locks)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// hold keeps key busy until the test ends.
func hold(t *testing.T, locks, key string) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(lockruntest.Binary(t), "run", key, "--", "sh", "-c", "echo > "+ready+"; sleep 60")
	cmd.Env = append(os.Environ(), "LOCKRUN_BACKEND=file://"+locks)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("holder did not start")
		}
	}
}

// line returns the first line of file that starts with prefix, without it.
func line(t *testing.T, file, prefix string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, prefix) {
			return strings.TrimPrefix(l, prefix)
		}
	}
	t.Fatalf("%s has no line starting with %q", file, prefix)
	return ""
}

func TestCrontab(t *testing.T) {
	fields := strings.Fields(line(t, "crontab", "*/15 "))
	command := strings.Join(fields[4:], " ")
	locks := t.TempDir()
	if out, code := shell(t, locks, command); code != 0 || !strings.Contains(out, "report run") {
		t.Errorf("free lock: exit %d, output %q", code, out)
	}
	hold(t, locks, "nightly-report")
	if out, code := shell(t, locks, command); code != 0 || out != "" {
		t.Errorf("busy lock: exit %d, output %q; want 0 and silence for cron", code, out)
	}
}

func TestCIDeploysQueueUp(t *testing.T) {
	locks := t.TempDir()
	var mu sync.Mutex
	var all bytes.Buffer
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			out, code := shell(t, locks, "examples/ci-deploy.sh staging")
			if code != 0 {
				t.Errorf("deploy exit %d: %s", code, out)
			}
			mu.Lock()
			all.WriteString(out)
			mu.Unlock()
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSpace(all.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "deploying") || !strings.HasPrefix(lines[1], "deployed") {
		t.Errorf("deploys overlapped or failed:\n%s", all.String())
	}
}

func TestSystemdService(t *testing.T) {
	start := line(t, "systemd/report.service", "ExecStart=")
	if line(t, "systemd/report.service", "SuccessExitStatus=") != "75" {
		t.Error("the unit does not treat a busy lock (75) as success")
	}
	locks := t.TempDir()
	if out, code := shell(t, locks, start); code != 0 || !strings.Contains(out, "report run") {
		t.Errorf("ExecStart: exit %d, output %q", code, out)
	}
	hold(t, locks, "nightly-report")
	if out, code := shell(t, locks, start); code != 75 {
		t.Errorf("ExecStart on a busy lock: exit %d, output %q; want 75", code, out)
	}
}

func TestFencedBackfillRefusesStaleTokens(t *testing.T) {
	locks, store := t.TempDir(), filepath.Join(t.TempDir(), "store")
	out, code := shell(t, locks, `lockrun run backfill-2026 -- examples/fenced-backfill/backfill.sh "$1"`, store)
	if code != 0 {
		t.Fatalf("backfill exit %d: %s", code, out)
	}
	before, _ := os.ReadFile(store)
	if n := strings.Count(string(before), "batch"); n != 3 {
		t.Fatalf("store has %d batches, want 3:\n%s", n, before)
	}
	token := strings.TrimSpace(line(t, store+".fence.value", ""))
	// A writer that lost its lock while paused still has token-1.
	stale := fmt.Sprintf(`t=%s; examples/fenced-backfill/fenced-write "$1" $((t-1)) "stale write"`, token)
	if out, code := shell(t, locks, stale, store); code != 1 || !strings.Contains(out, "refused") {
		t.Errorf("stale write: exit %d, %q; want refused", code, out)
	}
	if after, _ := os.ReadFile(store); !bytes.Equal(before, after) {
		t.Errorf("a stale write changed the store:\n%s", after)
	}
	if out, code := shell(t, locks, `lockrun run backfill-2026 -- examples/fenced-backfill/backfill.sh "$1"`, store); code != 0 {
		t.Errorf("next run with a higher token refused: exit %d, %s", code, out)
	}
}
