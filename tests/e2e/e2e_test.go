package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/procfs"
)

// These tests run the real binary as a user would.

// env is a test's environment: its own lock directory.
func env(t *testing.T) []string {
	return append(os.Environ(), "LOCKRUN_BACKEND=file://"+t.TempDir())
}

var (
	run      = lockruntest.Run
	start    = lockruntest.Start
	exitCode = lockruntest.ExitCode
	waitFile = lockruntest.WaitLine
	alive    = lockruntest.Alive
)

func TestTokensIncreaseAcrossRuns(t *testing.T) {
	e := env(t)
	var last uint64
	for i := range 5 {
		r := run(t, e, "run", "k", "--", "sh", "-c", "echo $LOCKRUN_FENCING_TOKEN")
		tok, err := strconv.ParseUint(strings.TrimSpace(r.Stdout), 10, 64)
		if r.Code != 0 || err != nil || tok <= last {
			t.Fatalf("run %d: token %q after %d (exit %d, %s)", i, r.Stdout, last, r.Code, r.Stderr)
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
	if r.Code != 75 || time.Since(begin) > time.Second || !strings.Contains(r.Stderr, "the-holder") || strings.Count(r.Stderr, "\n") != 1 {
		t.Errorf("busy run: exit %d after %v, stderr %q; want 75 at once, one line naming the holder", r.Code, time.Since(begin), r.Stderr)
	}
	if r := run(t, e, "run", "-q", "--conflict-exit-code", "0", "k", "--", "true"); r.Code != 0 || r.Stderr != "" {
		t.Errorf("quiet busy run with --conflict-exit-code 0: exit %d, stderr %q", r.Code, r.Stderr)
	}
	r = run(t, e, "run", "--wait", "k", "--", "date", "+%s%N")
	if r.Code != 0 {
		t.Fatalf("waiting run: exit %d, %s", r.Code, r.Stderr)
	}
	if started, ended := r.Stdout, waitFile(t, done); strings.TrimSpace(started) < ended {
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
	if took := time.Since(begin); r.Code != 75 || took < 300*time.Millisecond || took > 3*time.Second || !strings.Contains(r.Stderr, "timed out") {
		t.Errorf("--timeout 300ms: exit %d after %v, stderr %q", r.Code, took, r.Stderr)
	}
}

func TestExitStatusPassesThrough(t *testing.T) {
	e := env(t)
	for script, want := range map[string]int{"exit 0": 0, "exit 3": 3, "exit 255": 255, "kill -TERM $$": 143, "kill -KILL $$": 137} {
		if r := run(t, e, "run", "k", "--", "sh", "-c", script); r.Code != want || r.Stderr != "" {
			t.Errorf("%q: exit %d, stderr %q; want %d and silence", script, r.Code, r.Stderr, want)
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
	if r := run(t, e, "run", "k", "--", "true"); r.Code != 0 {
		t.Errorf("lock not free after the run: exit %d, %s", r.Code, r.Stderr)
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
	// The watchdog keeps the flock until it has killed everything; then
	// the lock is free.
	if r := run(t, e, "run", "--timeout", "2s", "k", "--", "true"); r.Code != 0 {
		t.Errorf("lock not free after its holder was SIGKILLed: exit %d, %s", r.Code, r.Stderr)
	}
}

// A waiter killed in its wait leaves nothing behind: its watchdog, started
// before the lock comes so that the hand-off does not wait for it, guards
// no command yet and leaves quietly.
func TestSIGKILLOfAWaiterLeavesNoWatchdog(t *testing.T) {
	e, dir := env(t), t.TempDir()
	ready := filepath.Join(dir, "ready")
	start(t, e, "run", "k", "--", "sh", "-c", "echo > "+ready+"; sleep 30")
	waitFile(t, ready)
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	waiter := exec.Command(lockruntest.Binary(t), "run", "--wait", "k", "--", "true")
	waiter.Env, waiter.Stderr = e, stderr
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	// The watchdog's arguments ("PID [CGROUP]") end with the cgroup made
	// for the command, if lockrun may make one (root in CI).
	var watchdog []int
	var args []string
	for begin, ok := time.Now(), false; !ok; time.Sleep(time.Millisecond) {
		if time.Since(begin) > 10*time.Second {
			t.Fatalf("the waiting lockrun started no watchdog (children %v)", watchdog)
		}
		if watchdog, _ = procfs.Children(waiter.Process.Pid); len(watchdog) == 1 {
			args, ok = lockruntest.WatchdogArgs(watchdog[0])
		}
	}
	waiter.Process.Kill()
	waiter.Wait()
	waitDead(t, watchdog, time.Second)
	// The waiter itself may have said that it waits; its watchdog's lines
	// are its own ("lockrun: watchdog: ...").
	if b, _ := os.ReadFile(stderr.Name()); strings.Contains(string(b), "watchdog") {
		t.Errorf("the killed waiter's watchdog, which guarded no command, said %q", b)
	}
	if cgroup := args[len(args)-1]; strings.HasPrefix(cgroup, "/") {
		if _, err := os.Stat(cgroup); !os.IsNotExist(err) {
			t.Errorf("the killed waiter's cgroup %s is left behind (%v)", cgroup, err)
		}
	} else if os.Geteuid() == 0 {
		t.Errorf("a waiter running as root made no cgroup: watchdog arguments %q", args)
	}
}

// A stderr whose reader has gone does not kill lockrun when it logs (nor,
// through it, the command), and the command still gets SIGPIPE's default
// action: the signal is neither ignored nor blocked for it.
func TestBrokenStderrKillsNothing(t *testing.T) {
	e, out := env(t), filepath.Join(t.TempDir(), "out")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	cmd := exec.Command(lockruntest.Binary(t), "run", "-v", "k", "--", "sh", "-c", "sleep 0.2; grep -E '^Sig(Ign|Blk)' /proc/self/status > "+out)
	cmd.Env, cmd.Stderr = e, w
	if err := cmd.Run(); err != nil {
		t.Fatalf("lockrun with a broken stderr: %v", err)
	}
	status := waitFile(t, out)
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		mask, err := strconv.ParseUint(f[len(f)-1], 16, 64)
		if err != nil || mask&(1<<(syscall.SIGPIPE-1)) != 0 {
			t.Errorf("the command's %q: SIGPIPE is not at its default", line)
		}
	}
}

func TestCommandNotFoundOrNotExecutable(t *testing.T) {
	e := env(t)
	// Executable, but no format the kernel runs: exec fails only once the
	// lock is held and the watchdog armed, which must then go quietly.
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte{0, 1, 2, 3}, 0o755); err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]int{"no-such-command-anywhere": 127, "/etc/passwd": 126, garbage: 126} {
		for _, wait := range []string{"--wait=false", "--wait"} {
			r := run(t, e, "run", wait, "k", "--", cmd)
			if r.Code != want || strings.Count(r.Stderr, "\n") != 1 {
				t.Errorf("%s %s: exit %d, stderr %q; want %d and one line", wait, cmd, r.Code, r.Stderr, want)
			}
		}
	}
	if r := run(t, e, "run", "k", "--", "true"); r.Code != 0 {
		t.Errorf("lock not free: exit %d, %s", r.Code, r.Stderr)
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
		{nil, []string{"run", "--backend", "redis//:hunter2@host", "k", "--", "true"}, "no scheme"},
		{nil, []string{"run", "--backend", "redis:hunter2@host", "k", "--", "true"}, "--backend"},
		{nil, []string{"run", "--backend", "file:relative/dir", "k", "--", "true"}, "absolute"},
		{nil, []string{"run", "--no-such-flag", "k", "--", "true"}, "no-such-flag"},
		{nil, []string{"run", "k"}, "missing COMMAND"},
		{nil, []string{"run"}, "missing KEY"},
		{nil, []string{"run", "../../etc/passwd", "--", "true"}, "invalid key"},
		{nil, []string{"run", "--ttl", "3s", "--kill-grace", "5s", "k", "--", "true"}, "use a ttl of at least"},
		{nil, []string{"run", "k", "--ttl", "5s", "--", "true"}, "flags go before KEY"},
		{nil, []string{"run", "--ttl", "-1s", "k", "--", "true"}, "must be positive"},
		{nil, []string{"run", "--conflict-exit-code", "300", "k", "--", "true"}, "0..255"},
		{nil, []string{"run", "--log-format", "xml", "k", "--", "true"}, "text or json"},
		{[]string{"LOCKRUN_TTL=soon"}, []string{"run", "k", "--", "true"}, "LOCKRUN_TTL"},
		{nil, []string{"frobnicate"}, "unknown command"},
		{nil, []string{"status"}, "exactly one KEY"},
	}
	for _, c := range cases {
		r := run(t, append(e, c.env...), c.args...)
		if r.Code != 64 || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, c.want) ||
			strings.Contains(r.Stderr, "goroutine") || strings.Contains(r.Stderr, "hunter2") {
			t.Errorf("lockrun %v: exit %d, stderr %q; want 64 and one line with %q", c.args, r.Code, r.Stderr, c.want)
		}
	}
}

func TestJSONLogsStayOnStderr(t *testing.T) {
	r := run(t, env(t), "run", "-v", "--log-format", "json", "k", "--", "echo", "hello")
	if r.Code != 0 || r.Stdout != "hello\n" {
		t.Fatalf("exit %d, stdout %q", r.Code, r.Stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
	if len(lines) < 2 {
		t.Fatalf("verbose JSON log has %d lines: %q", len(lines), r.Stderr)
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
	if r := run(t, e, "status", "k"); r.Code != 0 || !strings.Contains(r.Stdout, "held by worker-7") {
		t.Errorf("status: exit %d, %q", r.Code, r.Stdout)
	}
	if r := run(t, e, "status", "--json", "k"); !strings.Contains(r.Stdout, `"held":true`) {
		t.Errorf("status --json: %q", r.Stdout)
	}
	begin := time.Now()
	if r := run(t, e, "release", "k"); r.Code != 0 {
		t.Fatalf("release: exit %d, %s", r.Code, r.Stderr)
	}
	if code := exitCode(t, holder); code != 76 {
		t.Errorf("revoked holder exit %d, want 76", code)
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("revoked holder stopped after %v, want within its 1s ttl", took)
	}
	if r := run(t, e, "status", "k"); !strings.Contains(r.Stdout, "free") {
		t.Errorf("status after release: %q", r.Stdout)
	}
}

func TestDefaultBackendNeedsNoFlags(t *testing.T) {
	key := fmt.Sprintf("e2e-default-%d", os.Getpid())
	e := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	r := run(t, e, "run", key, "--", "sh", "-c", "echo $LOCKRUN_BACKEND")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "file:///") {
		t.Errorf("default backend: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
}

func TestVersion(t *testing.T) {
	if r := run(t, os.Environ(), "--version"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "lockrun version ") {
		t.Errorf("--version: exit %d, %q", r.Code, r.Stdout)
	}
}

func pidsFrom(t *testing.T, path string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(waitFile(t, path)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitDead waits for every pid to die and returns how long that took.
func waitDead(t *testing.T, pids []int, within time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	for _, pid := range pids {
		for alive(pid) {
			if time.Since(begin) > within {
				t.Fatalf("process %d still alive after %v", pid, time.Since(begin))
			}
			time.Sleep(time.Millisecond)
		}
	}
	return time.Since(begin)
}

func TestSIGKILLOfLockrunKillsTheWholeGroup(t *testing.T) {
	e, pidFile := env(t), filepath.Join(t.TempDir(), "pids")
	cmd := start(t, e, "run", "k", "--", "sh", "-c", "sleep 30 & echo $$ $! > "+pidFile+"; wait")
	pids := pidsFrom(t, pidFile)
	cmd.Process.Kill()
	cmd.Wait()
	// The command itself dies by the kernel's parent-death signal at once;
	// the rest of its group by the watchdog, whose reaction includes the
	// rest of its own start-up when lockrun dies this young, on a machine
	// that CI keeps busy.
	waitDead(t, pids[:1], 100*time.Millisecond)
	waitDead(t, pids[1:], time.Second)
}

// A lockrun frozen on its own cannot renew; its watchdog must still kill
// the command by the local deadline, and lockrun reports the loss when it
// wakes.
func TestFrozenLockrunsCommandDiesByTheDeadline(t *testing.T) {
	frozenLockrunsCommandDies(t, lockruntest.Binary(t), os.Stderr)
}

// The watchdog kills before it says so, and no reader on its stderr
// (SIGPIPE) stops it.
func TestFrozenLockrunWithABrokenStderr(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	frozenLockrunsCommandDies(t, lockruntest.Binary(t), w)
}

// frozenLockrunsCommandDies freezes the lockrun bin (built before the
// clock starts) while its command runs, and checks that the command dies
// by the lease's local deadline. The clock starts before lockrun does, so
// lockrun's own start-up (tens of ms on a loaded host) counts against it:
// a 4s TTL leaves the watchdog's backstop (half the 200ms margin) room
// for it, where 1s's 50ms did not always.
func frozenLockrunsCommandDies(t *testing.T, bin string, stderr *os.File) {
	e, pidFile := env(t), filepath.Join(t.TempDir(), "pids")
	const ttl = 4 * time.Second
	deadline := ttl * 99 / 100 // the local deadline: the TTL less the clock-rate allowance
	begin := time.Now()
	cmd := exec.Command(bin, "run", "--ttl", ttl.String(), "k", "--", "sh", "-c", "sleep 30 & echo $$ $! > "+pidFile+"; wait")
	cmd.Env, cmd.Stderr = e, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pids := pidsFrom(t, pidFile)
	cmd.Process.Signal(syscall.SIGSTOP)
	waitDead(t, pids, ttl+time.Second)
	if took := time.Since(begin); took > deadline {
		t.Errorf("command died %v after lockrun started; the %v lease's local deadline is %v", took, ttl, deadline)
	}
	cmd.Process.Signal(syscall.SIGCONT)
	if code := exitCode(t, cmd); code != 76 {
		t.Errorf("lockrun woke with exit %d, want 76 (lost)", code)
	}
}

// stubbornGroup is a command whose process group has a member besides the
// command that ignores SIGTERM; it writes that member's pid to pidFile,
// then runs script.
func stubbornGroup(pidFile, script string) string {
	return "trap '' TERM; (trap '' TERM; while :; do sleep 0.05; done) & echo $! > " + pidFile + "; " + script
}

// A lockrun that has lost its lock and is SIGKILLed during the kill grace
// still has its watchdog, which kills the command's group at once.
func TestSIGKILLDuringTheKillGraceStillKillsTheGroup(t *testing.T) {
	e, pidFile := env(t), filepath.Join(t.TempDir(), "pid")
	cmd := start(t, e, "run", "--ttl", "6s", "--heartbeat", "200ms", "--kill-grace", "4s", "k", "--", "sh", "-c", stubbornGroup(pidFile, "wait"))
	pids := pidsFrom(t, pidFile)
	if r := run(t, e, "release", "k"); r.Code != 0 {
		t.Fatalf("release: %d %s", r.Code, r.Stderr)
	}
	time.Sleep(600 * time.Millisecond) // the loss is seen; SIGTERM was ignored
	cmd.Process.Kill()
	cmd.Wait()
	waitDead(t, pids, 200*time.Millisecond)
}

// Processes the command left behind are guarded by the watchdog until they
// are gone: a lockrun SIGKILLed while stopping them does not leave them.
func TestSIGKILLDuringCleanupStillKillsTheLeftovers(t *testing.T) {
	e, pidFile := env(t), filepath.Join(t.TempDir(), "pid")
	cmd := start(t, e, "run", "--ttl", "10s", "--kill-grace", "4s", "k", "--", "sh", "-c", stubbornGroup(pidFile, "exit 0"))
	pids := pidsFrom(t, pidFile)
	time.Sleep(300 * time.Millisecond) // the command exited; the leftover ignores SIGTERM
	if !alive(pids[0]) {
		t.Fatal("the leftover died before the test could kill lockrun")
	}
	cmd.Process.Kill()
	cmd.Wait()
	waitDead(t, pids, 200*time.Millisecond)
}

// With a cgroup of its own (root, or a delegated subtree), nothing the
// command starts escapes: a descendant that left the process group and
// the session dies with a SIGKILLed lockrun too.
func TestSIGKILLOfLockrunKillsEscapedDescendants(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a cgroup; CI runs as root")
	}
	e, dir := env(t), t.TempDir()
	pidFile, cgFile := filepath.Join(dir, "pid"), filepath.Join(dir, "cgroup")
	cmd := start(t, e, "run", "k", "--", "sh", "-c", "grep ^0:: /proc/self/cgroup > "+cgFile+"; setsid sleep 60 & echo $! > "+pidFile+"; wait")
	pids := pidsFrom(t, pidFile)
	if cg := waitFile(t, cgFile); !strings.Contains(cg, "/lockrun-") {
		t.Fatalf("the command runs in cgroup %q, not one of its own", cg)
	}
	cmd.Process.Kill()
	cmd.Wait()
	waitDead(t, pids, 200*time.Millisecond)
}
