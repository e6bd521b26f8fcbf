package serverproc

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startTree starts sh with a grandchild sleep in its own session, like a
// server's per-session process, and returns the grandchild's pid.
func startTree(t *testing.T, script string) (*Proc, int) {
	t.Helper()
	out := t.TempDir() + "/pid"
	p, err := Start(exec.Command("sh", "-c", "setsid sleep 30 & echo $! > "+out+"; "+script))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	var child int
	err = p.Ready(5*time.Second, func() error {
		b, err := os.ReadFile(out)
		if err == nil {
			child, err = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, child
}

// state is the process's state letter from /proc/pid/stat ("" once gone).
func state(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 && len(b) > i+2 {
		return string(b[i+2])
	}
	return ""
}

// waitState waits up to a second for pid to be in one of the states
// (letters of /proc/pid/stat; "-" stands for a process that is gone).
func waitState(t *testing.T, pid int, want string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		st := state(pid)
		if st == "" {
			st = "-"
		}
		if strings.Contains(want, st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d is in state %q, want one of %q", pid, st, want)
		}
	}
}

func TestSignalFreezesAndThawsTheTree(t *testing.T) {
	p, child := startTree(t, "sleep 30")
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitState(t, p.PID(), "T")
	waitState(t, child, "T")
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitState(t, p.PID(), "S")
	waitState(t, child, "S")
}

func TestKillEndsAFrozenTree(t *testing.T) {
	p, child := startTree(t, "sleep 30")
	p.Signal(syscall.SIGSTOP)
	p.Kill()
	waitState(t, child, "Z-") // a zombie of init, or gone
	if err := p.Signal(syscall.SIGCONT); err == nil {
		t.Error("Signal after Kill = nil, want an error: the server is not running")
	}
	p.Kill() // again: does nothing
}

func TestStopAsksTheMainProcessThenKills(t *testing.T) {
	p, child := startTree(t, "trap 'exit 0' TERM; sleep 30 & wait")
	defer syscall.Kill(child, syscall.SIGKILL)
	p.Signal(syscall.SIGSTOP)
	start := time.Now()
	p.Stop(syscall.SIGTERM, 5*time.Second)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Stop of a frozen server took %v: it must be thawed, then exit on the signal", d)
	}
	waitState(t, child, "S") // thawed, and left to the server: not sent the signal

	p, _ = startTree(t, "trap '' TERM; sleep 30")
	start = time.Now()
	p.Stop(syscall.SIGTERM, 200*time.Millisecond)
	if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
		t.Errorf("Stop of a server that ignores the signal took %v, want the grace, then a kill", d)
	}
}

func TestReadyFailsWhenTheProcessExits(t *testing.T) {
	p, err := Start(exec.Command("sh", "-c", "exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	notYet := errors.New("not yet")
	err = p.Ready(5*time.Second, func() error { return notYet })
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Ready = %v, want the exit status", err)
	}
	p, _ = startTree(t, "sleep 30")
	if err := p.Ready(50*time.Millisecond, func() error { return notYet }); !errors.Is(err, notYet) {
		t.Errorf("Ready = %v, want the probe's last error after the timeout", err)
	}
}
