package runner

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/clock"
)

// TestMeasureKillAmongManyProcesses measures how long SIGKILL takes to end
// the command while LOCKRUN_MEASURE_PROCS other processes (sleepers, in a
// session of their own, killed at the end) run on the machine, without a
// cgroup (an unprivileged lockrun) and with one. A measurement, not a
// check: it runs only when asked, e.g.
//
//	LOCKRUN_MEASURE_PROCS=9000 go test -run TestMeasureKill -v ./internal/runner
func TestMeasureKillAmongManyProcesses(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("LOCKRUN_MEASURE_PROCS"))
	if n <= 0 {
		t.Skip("set LOCKRUN_MEASURE_PROCS to the number of processes to measure among")
	}
	spawnSleepers(t, n)
	for _, contained := range []bool{false, true} {
		p := prepare(nil, clock.Boot, false, nil)
		if !contained {
			p.dropCgroup()
		}
		null, _ := os.Open(os.DevNull)
		if err := p.start(spec{path: "/bin/sleep", argv: []string{"sleep", "60"}, files: []*os.File{null, null, null}, termAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		go p.killAll()
		<-p.exited
		dead := time.Since(begin)
		<-p.reaped
		t.Logf("%d processes on the machine, cgroup %v: the command was dead %v after killAll began", n, contained, dead.Round(time.Microsecond))
		null.Close()
	}
}

// spawnSleepers starts n sleeping processes in a session of their own and
// kills them when the test ends.
func spawnSleepers(t *testing.T, n int) {
	t.Helper()
	before := countProcs()
	sh := exec.Command("/bin/sh", "-c", "i=0; while [ $i -lt "+strconv.Itoa(n)+" ]; do sleep 600 & i=$((i+1)); done; wait")
	sh.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-sh.Process.Pid, syscall.SIGKILL); sh.Wait() })
	for deadline := time.Now().Add(5 * time.Minute); countProcs() < before+n; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d processes after 5 minutes", countProcs())
		}
	}
}

func countProcs() int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n
}
