package runner

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestMain makes the test binary a watchdog when its arguments are
// "watchdog-of PID": it guards PID's descendants.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "watchdog-of" {
		pid, err := strconv.Atoi(os.Args[2])
		if err == nil {
			err = Watch(os.Stdin, pid, "")
		}
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A lockrun frozen right after it started the command may never run the
// goroutine that writes to the watchdog: the first deadline must reach the
// watchdog all the same (CI once saw TestFrozenLockrunsCommandDiesByTheDeadline fail so).
func TestWatchdogKillsByTheFirstDeadlineWithoutAWrite(t *testing.T) {
	guarded := exec.Command("/bin/sh", "-c", "sleep 30 & wait")
	if err := guarded.Start(); err != nil {
		t.Fatal(err)
	}
	died := make(chan struct{})
	go func() { guarded.Wait(); close(died) }()
	t.Cleanup(func() { guarded.Process.Kill(); <-died })

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{self, "watchdog-of", strconv.Itoa(guarded.Process.Pid)}
	wd, err := startWatchdog(argv, nil, time.Now().Add(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wd.stop(); syscall.Wait4(wd.pid, nil, 0, nil) })
	select {
	case <-died: // sh's wait ends when its sleep is SIGKILLed, or sh itself is
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog never used the deadline it was started with")
	}
}
