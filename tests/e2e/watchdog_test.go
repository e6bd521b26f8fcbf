package e2e_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/watchdog"
)

// fallbackLine is what lockrun -v says when it runs itself as the watchdog.
const fallbackLine = "no " + watchdog.ProgramName + " beside lockrun"

// lockrunAlone is a copy of lockrun in a directory of its own, without
// the watchdog program beside it: what a `go install` of ./cmd/lockrun
// alone leaves.
func lockrunAlone(t *testing.T) string {
	t.Helper()
	src, err := os.Open(lockruntest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(t.TempDir(), "lockrun")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// watchdogExe is the program the watchdog of a lockrun running bin runs,
// and lockrun's -v lines up to then.
func watchdogExe(t *testing.T, bin string) (exe string, stderr string) {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pid")
	var errb bytes.Buffer
	cmd := exec.Command(bin, "run", "-v", "k", "--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 30")
	cmd.Env, cmd.Stderr = env(t), &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pidsFrom(t, pidFile)
	exe, err := os.Readlink("/proc/" + strconv.Itoa(watchdogOf(t, cmd.Process.Pid)) + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	return exe, errb.String()
}

// lockrun starts the watchdog program installed beside it, and says
// nothing about it.
func TestTheWatchdogIsItsOwnProgram(t *testing.T) {
	bin := lockruntest.Binary(t)
	exe, stderr := watchdogExe(t, bin)
	if want := filepath.Join(filepath.Dir(bin), watchdog.ProgramName); exe != want {
		t.Errorf("the watchdog runs %s, want %s", exe, want)
	}
	if strings.Contains(stderr, fallbackLine) {
		t.Errorf("lockrun -v says %q with the watchdog program beside it:\n%s", fallbackLine, stderr)
	}
}

// Without the watchdog program beside it, lockrun runs itself as its
// watchdog, says so once at -v, and its command is guarded as well: a
// frozen lockrun's command still dies by the deadline.
func TestWithoutTheWatchdogProgramLockrunIsItsOwnWatchdog(t *testing.T) {
	bin := lockrunAlone(t)
	exe, stderr := watchdogExe(t, bin)
	if exe != bin {
		t.Errorf("the watchdog runs %s, want lockrun itself (%s)", exe, bin)
	}
	if n := strings.Count(stderr, fallbackLine); n != 1 {
		t.Errorf("lockrun -v says %q %d times, want once:\n%s", fallbackLine, n, stderr)
	}
	quiet := exec.Command(bin, "run", "k", "--", "true")
	quiet.Env = env(t)
	if out, err := quiet.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("a run without -v: %v, output %q; want success and silence", err, out)
	}
	frozenLockrunsCommandDies(t, bin, os.Stderr)
}
