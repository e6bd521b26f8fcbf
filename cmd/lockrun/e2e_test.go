package main_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests build the real binary and run it as a user would.

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "lockrun-e2e")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "lockrun")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building lockrun: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is a test's environment: its own lock directory.
func env(t *testing.T) []string {
	return append(os.Environ(), "LOCKRUN_BACKEND=file://"+t.TempDir())
}

type result struct {
	stdout, stderr string
	code           int
}

func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("running lockrun: %v", err)
	}
	return result{out.String(), errb.String(), code}
}

// start runs lockrun in the background; its command should touch ready.
func start(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func waitFile(t *testing.T, path string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("%s did not appear", path)
	return ""
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func TestTokensIncreaseAcrossRuns(t *testing.T) {
	e := env(t)
	var last uint64
	for i := range 5 {
		r := run(t, e, "run", "k", "--", "sh", "-c", "echo $LOCKRUN_FENCING_TOKEN")
		tok, err := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64)
		if r.code != 0 || err != nil || tok <= last {
			t.Fatalf("run %d: token %q after %d (exit %d, %s)", i, r.stdout, last, r.code, r.stderr)
		}
		last = tok
	}
}

func TestBusyExitsAtOnceAndWaitRunsAfter(t *testing.T) {
	e, dir := env(t), t.TempDir()
	ready, done := filepath.Join(dir, "ready"), filepath.Join(dir, "done")
	holder := start(t, e, "run", "--holder", "the-holder", "k", "--", "sh", "-c", "echo > "+ready+"; sleep 1; date +%s%N > "+done)
	waitFile(t, ready)

	begin := time.Now()
	r := run(t, e, "run", "k", "--", "true")
	if r.code != 75 || time.Since(begin) > time.Second || !strings.Contains(r.stderr, "the-holder") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("busy run: exit %d after %v, stderr %q; want 75 at once, one line naming the holder", r.code, time.Since(begin), r.stderr)
	}
	if r := run(t, e, "run", "-q", "--conflict-exit-code", "0", "k", "--", "true"); r.code != 0 || r.stderr != "" {
		t.Errorf("quiet busy run with --conflict-exit-code 0: exit %d, stderr %q", r.code, r.stderr)
	}
	r = run(t, e, "run", "--wait", "k", "--", "date", "+%s%N")
	if r.code != 0 {
		t.Fatalf("waiting run: exit %d, %s", r.code, r.stderr)
	}
	if started, ended := r.stdout, waitFile(t, done); strings.TrimSpace(started) < ended {
		t.Errorf("waiter's command started at %s, before the holder's ended at %s", started, ended)
	}
	if code := exitCode(t, holder); code != 0 {
		t.Errorf("holder exit %d", code)
	}
}

func TestTimeoutGivesUpBusy(t *testing.T) {
	e, ready := env(t), filepath.Join(t.TempDir(), "ready")
	start(t, e, "run", "k", "--", "sh", "-c", "echo > "+ready+"; sleep 10")
	waitFile(t, ready)
	begin := time.Now()
	r := run(t, e, "run", "--timeout", "300ms", "k", "--", "true")
	if took := time.Since(begin); r.code != 75 || took < 300*time.Millisecond || took > 3*time.Second || !strings.Contains(r.stderr, "timed out") {
		t.Errorf("--timeout 300ms: exit %d after %v, stderr %q", r.code, took, r.stderr)
	}
}

func TestExitStatusPassesThrough(t *testing.T) {
	e := env(t)
	for script, want := range map[string]int{"exit 0": 0, "exit 3": 3, "exit 255": 255, "kill -TERM $$": 143, "kill -KILL $$": 137} {
		if r := run(t, e, "run", "k", "--", "sh", "-c", script); r.code != want || r.stderr != "" {
			t.Errorf("%q: exit %d, stderr %q; want %d and silence", script, r.code, r.stderr, want)
		}
	}
}

func TestSIGTERMReachesTheCommandAndFreesTheLock(t *testing.T) {
	e, ready := env(t), filepath.Join(t.TempDir(), "ready")
	cmd := start(t, e, "run", "k", "--", "sh", "-c", "trap 'exit 9' TERM; echo > "+ready+"; while :; do sleep 0.01; done")
	waitFile(t, ready)
	cmd.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, cmd); code != 9 {
		t.Errorf("exit %d after SIGTERM, want the command's 9", code)
	}
	if r := run(t, e, "run", "k", "--", "true"); r.code != 0 {
		t.Errorf("lock not free after the run: exit %d, %s", r.code, r.stderr)
	}
}

func TestSIGKILLOfLockrunLeavesNoCommand(t *testing.T) {
	e, pidFile := env(t), filepath.Join(t.TempDir(), "pid")
	cmd := start(t, e, "run", "k", "--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 30")
	pid, _ := strconv.Atoi(waitFile(t, pidFile))
	cmd.Process.Kill()
	cmd.Wait()
	killed := time.Now()
	for alive(pid) {
		if time.Since(killed) > 100*time.Millisecond {
			t.Fatalf("command %d still alive %v after lockrun was SIGKILLed", pid, time.Since(killed))
		}
		time.Sleep(time.Millisecond)
	}
	if r := run(t, e, "run", "k", "--", "true"); r.code != 0 {
		t.Errorf("lock not free after its holder was SIGKILLed: exit %d, %s", r.code, r.stderr)
	}
}

// alive tells whether pid runs; a zombie does not (PID 1 may reap late).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

func TestCommandNotFoundOrNotExecutable(t *testing.T) {
	e := env(t)
	for cmd, want := range map[string]int{"no-such-command-anywhere": 127, "/etc/passwd": 126} {
		r := run(t, e, "run", "k", "--", cmd)
		if r.code != want || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want %d and one line", cmd, r.code, r.stderr, want)
		}
	}
	if r := run(t, e, "run", "k", "--", "true"); r.code != 0 {
		t.Errorf("lock not free: exit %d, %s", r.code, r.stderr)
	}
}

func TestUsageErrorsAreOneLine(t *testing.T) {
	e := env(t)
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"run", "--backend", "redis://user:hunter2@[::1", "k", "--", "true"}, "--backend"},
		{nil, []string{"run", "--backend", "nosuch://x", "k", "--", "true"}, "unknown scheme"},
		{nil, []string{"run", "--backend", "file:relative/dir", "k", "--", "true"}, "absolute"},
		{nil, []string{"run", "--no-such-flag", "k", "--", "true"}, "no-such-flag"},
		{nil, []string{"run", "k"}, "missing COMMAND"},
		{nil, []string{"run"}, "missing KEY"},
		{nil, []string{"run", "../../etc/passwd", "--", "true"}, "invalid key"},
		{nil, []string{"run", "--ttl", "3s", "--kill-grace", "5s", "k", "--", "true"}, "raise the ttl"},
		{nil, []string{"run", "--ttl", "-1s", "k", "--", "true"}, "must be positive"},
		{nil, []string{"run", "--conflict-exit-code", "300", "k", "--", "true"}, "0..255"},
		{nil, []string{"run", "--log-format", "xml", "k", "--", "true"}, "text or json"},
		{[]string{"LOCKRUN_TTL=soon"}, []string{"run", "k", "--", "true"}, "LOCKRUN_TTL"},
		{nil, []string{"frobnicate"}, "unknown command"},
		{nil, []string{"status"}, "exactly one KEY"},
	}
	for _, c := range cases {
		r := run(t, append(e, c.env...), c.args...)
		if r.code != 64 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, c.want) ||
			strings.Contains(r.stderr, "goroutine") || strings.Contains(r.stderr, "hunter2") {
			t.Errorf("lockrun %v: exit %d, stderr %q; want 64 and one line with %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

func TestJSONLogsStayOnStderr(t *testing.T) {
	r := run(t, env(t), "run", "-v", "--log-format", "json", "k", "--", "echo", "hello")
	if r.code != 0 || r.stdout != "hello\n" {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) < 2 {
		t.Fatalf("verbose JSON log has %d lines: %q", len(lines), r.stderr)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "{") || !strings.Contains(l, `"key":"k"`) {
			t.Errorf("log line is not a JSON record about k: %q", l)
		}
	}
}

func TestStatusAndForceRelease(t *testing.T) {
	e, ready := env(t), filepath.Join(t.TempDir(), "ready")
	holder := start(t, e, "run", "--ttl", "1s", "--holder", "worker-7", "k", "--", "sh", "-c", "echo > "+ready+"; sleep 30")
	waitFile(t, ready)
	if r := run(t, e, "status", "k"); r.code != 0 || !strings.Contains(r.stdout, "held by worker-7") {
		t.Errorf("status: exit %d, %q", r.code, r.stdout)
	}
	if r := run(t, e, "status", "--json", "k"); !strings.Contains(r.stdout, `"held":true`) {
		t.Errorf("status --json: %q", r.stdout)
	}
	begin := time.Now()
	if r := run(t, e, "release", "k"); r.code != 0 {
		t.Fatalf("release: exit %d, %s", r.code, r.stderr)
	}
	if code := exitCode(t, holder); code != 76 {
		t.Errorf("revoked holder exit %d, want 76", code)
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("revoked holder stopped after %v, want within its 1s ttl", took)
	}
	if r := run(t, e, "status", "k"); !strings.Contains(r.stdout, "free") {
		t.Errorf("status after release: %q", r.stdout)
	}
}

func TestDefaultBackendNeedsNoFlags(t *testing.T) {
	key := fmt.Sprintf("e2e-default-%d", os.Getpid())
	e := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	r := run(t, e, "run", key, "--", "sh", "-c", "echo $LOCKRUN_BACKEND")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "file:///") {
		t.Errorf("default backend: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestVersion(t *testing.T) {
	if r := run(t, nil, "--version"); r.code != 0 || !strings.HasPrefix(r.stdout, "lockrun version ") {
		t.Errorf("--version: exit %d, %q", r.code, r.stdout)
	}
}
