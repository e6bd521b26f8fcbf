package procfs

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDescendantsFindsGrandchildrenAndNotOthers(t *testing.T) {
	// sh starts a sleep in its own session: still our descendant.
	out := t.TempDir() + "/pid"
	cmd := exec.Command("sh", "-c", "setsid sleep 30 & echo $! > "+out+"; sleep 30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var grandchild int
	for deadline := time.Now().Add(5 * time.Second); grandchild == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, _ := os.ReadFile(out)
		grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	defer func() {
		if p, err := os.FindProcess(grandchild); err == nil {
			p.Kill()
		}
	}()
	got := Descendants(os.Getpid())
	if !slices.Contains(got, cmd.Process.Pid) || !slices.Contains(got, grandchild) {
		t.Errorf("Descendants = %v, want the child %d and the grandchild %d", got, cmd.Process.Pid, grandchild)
	}
	if slices.Contains(got, os.Getpid()) || slices.Contains(got, 1) {
		t.Errorf("Descendants = %v includes the root or init", got)
	}
	if d := Descendants(grandchild); len(d) != 0 {
		t.Errorf("a sleep has descendants %v", d)
	}
}

func TestGroupAliveIgnoresTheDead(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	if !GroupAlive(pgid) {
		t.Fatal("a running group reported dead")
	}
	cmd.Process.Kill()
	// Not reaped yet: a zombie, which kill(-pgid, 0) would still count.
	for deadline := time.Now().Add(5 * time.Second); GroupAlive(pgid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a killed group still reported alive")
		}
	}
	if err := syscall.Kill(-pgid, 0); err != nil {
		t.Errorf("the zombie should still be signalable before it is reaped: %v", err)
	}
	cmd.Wait()
}

func TestSwitchesGrowWhenTheProcessSleeps(t *testing.T) {
	before := Switches(os.Getpid())
	for range 10 {
		time.Sleep(time.Millisecond)
	}
	if after := Switches(os.Getpid()); before <= 0 || after <= before {
		t.Errorf("context switches %d, then %d after sleeping 10 times", before, after)
	}
	if n := Switches(-1); n != 0 {
		t.Errorf("Switches of no process = %d, want 0", n)
	}
}

func TestChildrenListsTheLiveAndTheUnreaped(t *testing.T) {
	live := exec.Command("sleep", "30")
	dead := exec.Command("true")
	for _, c := range []*exec.Cmd{live, dead} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	for deadline := time.Now().Add(5 * time.Second); alive(dead.Process.Pid) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	got, ok := Children(os.Getpid())
	if !ok {
		t.Fatal("this kernel has no /proc/PID/task/TID/children: the runner falls back to Descendants")
	}
	if !slices.Contains(got, live.Process.Pid) || !slices.Contains(got, dead.Process.Pid) {
		t.Errorf("Children = %v, want the sleep %d and the unreaped true %d", got, live.Process.Pid, dead.Process.Pid)
	}
	dead.Wait()
	if got, _ := Children(os.Getpid()); slices.Contains(got, dead.Process.Pid) {
		t.Errorf("Children = %v still lists the reaped %d", got, dead.Process.Pid)
	}
}

// alive tells whether pid runs (is not a zombie).
func alive(pid int) bool {
	_, ok := read(pid)
	return ok
}

func TestThreadChildrenReadsTheGivenThreadsOnly(t *testing.T) {
	c := exec.Command("sleep", "30")
	forked, read := make(chan int), make(chan struct{})
	go func() {
		// The child is on the list of the thread that forked it, for as
		// long as that thread lives: it stays until the lists are read.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := c.Start(); err != nil {
			t.Error(err)
		}
		forked <- unix.Gettid()
		<-read
	}()
	tid := <-forked
	defer close(read)
	if c.Process == nil {
		t.FailNow()
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	if got, ok := ThreadChildren(os.Getpid(), tid); !ok || !slices.Contains(got, c.Process.Pid) {
		t.Errorf("ThreadChildren(the forking thread %d) = %v, %v; want the sleep %d", tid, got, ok, c.Process.Pid)
	}
	if main := os.Getpid(); main != tid {
		if got, _ := ThreadChildren(os.Getpid(), main); slices.Contains(got, c.Process.Pid) {
			t.Errorf("ThreadChildren(the main thread) = %v lists %d, forked by thread %d", got, c.Process.Pid, tid)
		}
	}
	if got, ok := ThreadChildren(os.Getpid(), tid, 1<<30); ok {
		t.Errorf("ThreadChildren(a thread that is not there) = %v, true; want false: the caller cannot tell", got)
	}
}
