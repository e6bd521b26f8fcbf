package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain makes the test binary a watchdog when its arguments are
// "watchdog-of PID [CGROUP]": it guards PID's descendants.
func TestMain(m *testing.M) {
	if len(os.Args) >= 3 && os.Args[1] == "watchdog-of" {
		pid, err := strconv.Atoi(os.Args[2])
		if err == nil {
			err = Watch(os.Stdin, pid, strings.Join(os.Args[3:], ""))
		}
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A lockrun frozen right after it started the command may never run the
// goroutine that writes to the watchdog: the first deadline, which guard
// sends, must reach the watchdog all the same (CI once saw
// TestFrozenLockrunsCommandDiesByTheDeadline fail so).
func TestWatchdogKillsByTheFirstDeadlineAlone(t *testing.T) {
	died, wd := guardedBy(t)
	if err := wd.guard(time.Now().Add(200*time.Millisecond), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-died: // sh's wait ends when its sleep is SIGKILLed
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog never used the deadline guard sent")
	}
}

// guardedBy starts a watchdog (see TestMain) for a new shell's
// descendants: died is closed when the shell ends, which it does once its
// child is killed.
func guardedBy(t *testing.T, args ...string) (died <-chan struct{}, wd *watchdogLink) {
	t.Helper()
	guarded := exec.Command("/bin/sh", "-c", "sleep 30 & wait")
	if err := guarded.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	go func() { guarded.Wait(); close(ended) }()
	t.Cleanup(func() { guarded.Process.Kill(); <-ended })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wd, err = startWatchdog(append([]string{self, "watchdog-of", strconv.Itoa(guarded.Process.Pid)}, args...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wd.stop(); syscall.Wait4(wd.pid, nil, 0, nil) })
	return ended, wd
}

// A watchdog started for a lock that never came guards nothing: dismissed,
// it removes the command's (empty) cgroup, exits at once and kills no one.
func TestUnarmedWatchdogLeavesQuietly(t *testing.T) {
	cgroup := filepath.Join(t.TempDir(), "cgroup") // rmdir treats it as it would a cgroup
	if err := os.Mkdir(cgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	died, wd := guardedBy(t, cgroup)
	wd.dismiss()
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(wd.pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("dismissed watchdog: %v, status %v; want exit 0", err, ws)
	}
	if _, err := os.Stat(cgroup); !os.IsNotExist(err) {
		t.Errorf("the cgroup made for a command that never started is still there (%v)", err)
	}
	select {
	case <-died:
		t.Fatal("a watchdog that was never armed killed the command")
	case <-time.After(100 * time.Millisecond):
	}
}

// A watchdog that died while lockrun waited for the lock is replaced when
// the lock comes: the command does not run unguarded.
func TestAWatchdogThatDiedWhileWaitingIsReplaced(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := prepare([]string{self, "watchdog-of", strconv.Itoa(os.Getpid())})
	if p.wd == nil {
		t.Fatalf("prepare started no watchdog: %v", p.wdErr)
	}
	first := p.wd.pid
	syscall.Kill(first, syscall.SIGKILL)
	for alive(first) {
		time.Sleep(time.Millisecond)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	err = p.start(spec{path: "/bin/sleep", argv: []string{"sleep", "30"},
		files: []*os.File{null, null, null}, killAt: time.Now().Add(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if p.wd == nil || p.wd.pid == first {
		t.Fatalf("the command started without a new watchdog (%v)", p.wdErr)
	}
	select {
	case <-p.exited:
		if !p.status.Signaled() || p.status.Signal() != syscall.SIGKILL {
			t.Errorf("command ended with %v; want the new watchdog's SIGKILL", p.status)
		}
	case <-time.After(10 * time.Second):
		syscall.Kill(p.pid, syscall.SIGKILL)
		t.Fatal("the command outlived its deadline: no watchdog guarded it")
	}
	<-p.reaped
}

// alive tells whether pid runs; a zombie does not.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b[strings.LastIndexByte(string(b), ')')+1:]), " Z ")
}

// The watchdog holds the lock's files it was sent: a flock stays held
// after lockrun closes its own descriptor, until the watchdog exits.
func TestWatchdogHoldsTheLocksFiles(t *testing.T) {
	_, wd := guardedBy(t)
	path := filepath.Join(t.TempDir(), "lock")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := wd.guard(time.Now().Add(time.Minute), []*os.File{f}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	other, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatal("the flock was freed while the watchdog should hold it")
	}
	wd.dismiss() // armed: it kills the guarded shell's child, then exits
	syscall.Wait4(wd.pid, nil, 0, nil)
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the flock outlived the watchdog: %v", err)
	}
}
