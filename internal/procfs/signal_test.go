package procfs

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestSignalChecksTheParent(t *testing.T) {
	cmd := exec.Command("/bin/sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() { cmd.Process.Kill(); <-done }()
	if Signal(cmd.Process.Pid, os.Getpid()+1, syscall.SIGKILL) {
		t.Error("Signal sent to a process whose parent is not the one given")
	}
	if tree := Tree(os.Getpid()); tree[cmd.Process.Pid] != os.Getpid() {
		t.Errorf("Tree(self) = %v, lacks the child %d", tree, cmd.Process.Pid)
	}
	if n := SignalDescendants(os.Getpid(), syscall.SIGKILL, func(int) bool { return false }); n < 1 {
		t.Errorf("SignalDescendants signalled %d processes, want the child", n)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the child outlived SIGKILL")
	}
}
