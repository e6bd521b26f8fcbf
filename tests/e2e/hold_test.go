package e2e_test

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
)

// holdRenewing starts `lockrun run -v` on url and key with a child that ignores
// SIGTERM (so only the SIGKILL at the deadline stops it) and writes its pid
// and token. It returns the process, the child's pid and token, and a
// channel that receives, after each renewal lockrun logs, the earliest
// time that renewal can have been sent.
func holdRenewing(t *testing.T, url, key string, args ...string) (*exec.Cmd, int, uint64, <-chan time.Time) {
	t.Helper()
	dir := t.TempDir()
	pidFile, tokFile := filepath.Join(dir, "pid"), filepath.Join(dir, "token")
	argv := append([]string{"run", "-v", "-b", url}, args...)
	argv = append(argv, key, "--", "sh", "-c", "trap '' TERM; echo $LOCKRUN_FENCING_TOKEN > "+tokFile+"; echo $$ > "+pidFile+"; exec sleep 60")
	cmd := exec.Command(lockruntest.Binary(t), argv...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	renewed := make(chan time.Time, 100)
	go func() {
		for sc := bufio.NewScanner(stderr); sc.Scan(); {
			if line := sc.Text(); strings.Contains(line, "lease renewed") {
				renewed <- time.Now().Add(-tookOf(line) - pipeSlack)
			}
		}
	}()
	pid, _ := strconv.Atoi(lockruntest.WaitLine(t, pidFile))
	tok, _ := strconv.ParseUint(lockruntest.WaitLine(t, tokFile), 10, 64)
	return cmd, pid, tok, renewed
}

// pipeSlack bounds the time from lockrun logging a renewal to the test
// reading the line.
const pipeSlack = 20 * time.Millisecond

// latest is the newest of sent and the renewal times waiting in renewed.
func latest(sent time.Time, renewed <-chan time.Time) time.Time {
	for {
		select {
		case s := <-renewed:
			sent = s
		default:
			return sent
		}
	}
}

// tookOf reads took=DURATION from a log line (rounded to the millisecond).
func tookOf(line string) time.Duration {
	_, rest, _ := strings.Cut(line, "took=")
	d, _ := time.ParseDuration(strings.Fields(rest + " ")[0])
	return d + time.Millisecond
}
