package procfs

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
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
