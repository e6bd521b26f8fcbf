package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/clock"
	"github.com/lockrun/lockrun/internal/memory"
	"github.com/lockrun/lockrun/internal/watchdog"
)

// waitPid waits for the command to write its pid to path.
func waitPid(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err == nil {
				return pid
			}
		}
	}
	t.Fatalf("%s never held a pid", path)
	return 0
}

// The SIGTERM of a loss reaches the command's group before lockrun walks
// /proc for stragglers: that walk costs ~10µs per process on the machine,
// and must not delay the signal that reaches almost everything.
func TestTheGroupIsSignalledBeforeTheProcWalk(t *testing.T) {
	store := memory.New()
	store.FailRenewals(func(context.Context) error { return backend.ErrLost })
	pidFile := filepath.Join(t.TempDir(), "pid")
	job := testJob(t, store, "echo $$ > "+pidFile+"; exec sleep 30")
	walk := signalDescendants
	defer func() { signalDescendants = walk }()
	var before []string
	signalDescendants = func(root int, sig syscall.Signal, skip func(int) bool) int {
		if pid := waitPid(t, pidFile); sig == syscall.SIGTERM && len(before) == 0 {
			// The command dies of SIGTERM; if it was not sent yet, it is
			// alive for as long as this walk lasts.
			for deadline := time.Now().Add(2 * time.Second); alive(pid) && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			before = append(before, strconv.FormatBool(alive(pid)))
		}
		return walk(root, sig, skip)
	}
	wantExit(t, Run(t.Context(), job), backend.ErrLost)
	if len(before) == 0 || before[0] != "false" {
		t.Errorf("the command was alive through the /proc walk (%v): the group was not signalled first", before)
	}
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b[strings.LastIndexByte(string(b), ')')+1:]), " Z ")
}

// A suspend longer than the lease, on the runner's clock (CLOCK_BOOTTIME
// in production, a fake here): the command is stopped at once on wake and
// the run ends lost, though Go's own clock saw no time pass.
func TestASuspendPastTheLeaseStopsTheCommand(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	pidFile := filepath.Join(t.TempDir(), "pid")
	job := testJob(t, memory.New(), "echo $$ > "+pidFile+"; exec sleep 30")
	job.Clock = fake
	go func() {
		waitPid(t, pidFile)
		time.Sleep(20 * time.Millisecond)
		fake.Advance(2 * job.Policy.TTL)
	}()
	begin := time.Now()
	wantExit(t, Run(t.Context(), job), backend.ErrLost)
	if took := time.Since(begin); took > 3*time.Second {
		t.Errorf("the run took %v; the suspend should have stopped the command at once", took)
	}
}

// A lockrun that wakes past its term deadline before the exec does not
// start the command, even with no watchdog to stop it.
func TestNoStartAfterTheTermDeadline(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	marker := filepath.Join(t.TempDir(), "ran")
	job := testJob(t, memory.New(), "touch "+marker)
	job.Clock = fake
	p := prepare(nil, fake, false, nil)
	fake.Advance(job.Policy.TTL) // frozen between the grant (at the fake's start) and the exec
	err := p.start(spec{path: job.Path, argv: job.Args, files: job.Stdio[:], termAt: job.Policy.TermAt(time.Unix(1000, 0))})
	if err != errTooLate {
		t.Errorf("start after the term deadline = %v, want errTooLate", err)
	}
	<-p.reaped
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran after its term deadline")
	}
}

// A watchdog that died while lockrun waited for the lock is replaced when
// the lock comes: the command does not run unguarded.
func TestAWatchdogThatDiedWhileWaitingIsReplaced(t *testing.T) {
	p := prepare(testWatchdog(t), clock.Boot, false, nil)
	<-p.ready // made in the background
	if p.wd == nil {
		t.Fatalf("prepare started no watchdog: %v", p.wdErr)
	}
	first := p.wd.Pid()
	syscall.Kill(first, syscall.SIGKILL)
	for alive(first) {
		time.Sleep(time.Millisecond)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	soon := clock.Boot.Now().Add(300 * time.Millisecond)
	err = p.start(spec{path: "/bin/sleep", argv: []string{"sleep", "30"},
		files: []*os.File{null, null, null}, termAt: soon, killAt: soon})
	if err != nil {
		t.Fatal(err)
	}
	if p.wd == nil || p.wd.Pid() == first {
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

// A command that was to have a watchdog never starts without one.
func TestNoWatchdogNoStart(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	job := testJob(t, memory.New(), "touch "+marker)
	job.Watchdog = &watchdog.Program{Path: "/nonexistent/watchdog"}
	if err := Run(t.Context(), job); !errors.Is(err, errNoWatchdog) {
		t.Errorf("Run without a possible watchdog = %v, want errNoWatchdog", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran unguarded")
	}
}
