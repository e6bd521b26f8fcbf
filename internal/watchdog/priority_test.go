package watchdog

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/clock"
	"golang.org/x/sys/unix"
)

// mayRealtime tells whether this process may make a thread SCHED_FIFO, as
// the watchdog, started by it, then may too.
func mayRealtime(t *testing.T) bool {
	t.Helper()
	var lim unix.Rlimit
	_ = unix.Getrlimit(unix.RLIMIT_RTPRIO, &lim)
	return os.Geteuid() == 0 || lim.Cur >= rtPriority
}

// threads counts the threads of pid.
func threads(t *testing.T, pid int) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(tasks)
}

// realtimeThreads counts the threads of pid that run SCHED_FIFO.
func realtimeThreads(t *testing.T, pid int) int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		if attr, err := unix.SchedGetAttr(tid, 0); err == nil && attr.Policy == unix.SCHED_FIFO {
			n++
		}
	}
	return n
}

// waitRealtime waits, 5 s at most, for a SCHED_FIFO thread in pid, and
// returns how many it has.
func waitRealtime(t *testing.T, pid int) int {
	t.Helper()
	n := 0
	for deadline := time.Now().Add(5 * time.Second); n == 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		n = realtimeThreads(t, pid)
	}
	return n
}

// realtimeGuard is a watchdog guarding a command with a far deadline,
// once it runs real-time; the test is skipped where it may not.
func realtimeGuard(t *testing.T) *Link {
	t.Helper()
	if !mayRealtime(t) {
		t.Skip("this process may not use SCHED_FIFO (not root, no RLIMIT_RTPRIO)")
	}
	_, wd := guardedBy(t, "")
	if err := wd.Guard(clock.Boot.Now().Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	waitRealtime(t, wd.Pid())
	return wd
}

// The watchdog runs real-time where it may, every thread of it (the one
// that wakes needs a P, which any of them may hold): at nice 0 or -20, a
// host whose cores are busy kept it from waking for up to 186 ms in the
// fault harness, more than its 50 ms to the local deadline.
func TestWatchdogRunsRealtime(t *testing.T) {
	wd := realtimeGuard(t)
	if all, n := threads(t, wd.Pid()), realtimeThreads(t, wd.Pid()); n == 0 || n != all {
		t.Errorf("%d of the watchdog's %d threads run SCHED_FIFO; want all", n, all)
	}
}

// A watchdog stopped with nothing left to guard leaves real time before
// its SIGKILL, so that its exit does not pre-empt the release: its
// zombie, which only the test reaps, keeps the policy it died with.
func TestStoppedWatchdogLeavesRealtime(t *testing.T) {
	wd := realtimeGuard(t)
	pid := wd.Pid()
	wd.Stop()
	var stat []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		// Fields after the command name's closing parenthesis: state is
		// field 3, policy field 41.
		stat = strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		if stat[0] == "Z" || time.Now().After(deadline) {
			break
		}
	}
	if stat[0] != "Z" {
		t.Fatalf("the stopped watchdog is in state %s, not a zombie", stat[0])
	}
	if policy := stat[41-3]; policy != strconv.Itoa(unix.SCHED_NORMAL) {
		t.Errorf("the watchdog died with scheduling policy %s; want %d (SCHED_NORMAL)", policy, unix.SCHED_NORMAL)
	}
	_, _ = syscall.Wait4(pid, nil, 0, nil)
}

// Beside a busy loop on every core, the watchdog kills the command close
// to its deadline, round after round, and the command is dead soon after.
func TestWatchdogKillsOnTimeUnderCPUPressure(t *testing.T) {
	if !mayRealtime(t) {
		t.Skip("this process may not use SCHED_FIFO (not root, no RLIMIT_RTPRIO)")
	}
	stop := hog(t)
	defer stop()
	const rounds, bound = 10, 20 * time.Millisecond
	for i := range rounds {
		g, wd := guardedByScript(t, "", "setsid sleep 30 & wait")
		if err := wd.Guard(clock.Boot.Now().Add(time.Minute), nil); err != nil {
			t.Fatal(err)
		}
		waitRealtime(t, wd.Pid()) // started: at its priority, which a fresh process is not
		pid := sleepGroup(t, g)
		at := clock.Boot.Now().Add(100 * time.Millisecond)
		if err := wd.Started(pid, at); err != nil {
			t.Fatal(err)
		}
		if clock.Boot.Now().After(at) {
			t.Fatalf("round %d: the test, at nice 0 beside the hog, sent the deadline after it passed", i)
		}
		// The kernel's state at the bound: a test that wakes late only
		// looks later, which can hide a late kill but never invent one.
		time.Sleep(at.Add(bound).Sub(clock.Boot.Now()))
		if alive(pid) {
			status, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
			for alive(pid) {
				time.Sleep(time.Millisecond)
			}
			t.Errorf("round %d: the command was alive %v after the watchdog's deadline (%s; seen dead after %v)",
				i, bound, signalState(status), clock.Boot.Now().Sub(at).Round(time.Millisecond))
		}
		<-g.ended
	}
}

// alive tells whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// sleepGroup is the process group of the stand-in's setsid sleep.
func sleepGroup(t *testing.T, g *guarded) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		kids, _ := os.ReadFile("/proc/" + strconv.Itoa(g.cmd.Process.Pid) + "/task/" + strconv.Itoa(g.cmd.Process.Pid) + "/children")
		if pid, err := strconv.Atoi(string(trimSpace(kids))); err == nil {
			if pgid, err := syscall.Getpgid(pid); err == nil && pgid == pid {
				return pid
			}
		}
	}
	t.Fatal("the stand-in's sleep did not start")
	return 0
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

// hog runs a busy loop on every core, as tests/faults does, until stop.
func hog(t *testing.T) (stop func()) {
	t.Helper()
	var cmds []*exec.Cmd
	for range runtime.NumCPU() {
		cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	return func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
}

// signalState is the state and pending signals of a /proc/pid/status: a
// SIGKILL not pending yet means the watchdog had not acted.
func signalState(status []byte) string {
	var out []string
	for _, l := range bytes.Split(status, []byte("\n")) {
		for _, k := range []string{"State:", "SigPnd:", "ShdPnd:"} {
			if bytes.HasPrefix(l, []byte(k)) {
				out = append(out, string(bytes.Join(bytes.Fields(l), []byte(" "))))
			}
		}
	}
	return strings.Join(out, ", ")
}

// The watchdog becomes real-time realtimeAfter after its start, not at
// once (its start-up would pre-empt lockrun and the command), and at once
// when a deadline is near: it never sleeps toward a deadline at normal
// priority.
func TestRealtimeComesAfterTheStartOrBeforeADeadline(t *testing.T) {
	ms := int64(time.Millisecond)
	start := int64(1000 * ms)
	rtAt := start + int64(realtimeAfter)
	for _, c := range []struct {
		now, deadline int64
		want          bool
	}{
		{start, 0, false},                  // just started, no deadline yet
		{start, start + 60*1000*ms, false}, // a deadline a minute away
		{rtAt - 1, 0, false},               // not quite yet
		{rtAt, 0, true},                    // its time has come
		{start, start + 15*ms, true},       // a deadline too near to wait for
		{start, start + 2*int64(realtimeAfter), false},
	} {
		if got := realtimeDue(c.now, rtAt, c.deadline); got != c.want {
			t.Errorf("realtimeDue(now=+%dms, deadline=%d) = %v, want %v", (c.now-start)/ms, c.deadline, got, c.want)
		}
	}
	for _, c := range [][3]int64{{0, 0, 0}, {5, 0, 5}, {0, 7, 7}, {5, 7, 5}, {9, 7, 7}} {
		if got := earliest(c[0], c[1]); got != c[2] {
			t.Errorf("earliest(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}
