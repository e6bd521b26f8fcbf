package watchdog

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/clock"
)

// TestMain makes the test binary a watchdog when its arguments are
// "watchdog-of GUARDED -- PID [CGROUP]": it guards GUARDED, a stand-in
// for lockrun, instead of PID (the test process).
func TestMain(m *testing.M) {
	if len(os.Args) >= 5 && os.Args[1] == "watchdog-of" && os.Args[3] == "--" {
		args := append([]string{os.Args[2]}, os.Args[5:]...)
		if err := Main(os.Stdin, args); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// guarded is a stand-in for lockrun: a shell whose child (the command)
// sleeps. ended is closed when the shell ends; status is how it ended.
type guarded struct {
	cmd   *exec.Cmd
	ended chan struct{}
}

func (g *guarded) killed() bool {
	ws, ok := g.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// guardedBy starts a stand-in for lockrun and a watchdog (see TestMain)
// that guards its descendants.
func guardedBy(t *testing.T, cgroupDir string) (*guarded, *Link) {
	t.Helper()
	return guardedByScript(t, cgroupDir, "sleep 30 & wait")
}

// guardedByScript is guardedBy with the stand-in's own shell script.
func guardedByScript(t *testing.T, cgroupDir, script string) (*guarded, *Link) {
	t.Helper()
	g := &guarded{cmd: exec.Command("/bin/sh", "-c", script), ended: make(chan struct{})}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.cmd.Wait(); close(g.ended) }()
	t.Cleanup(func() { g.cmd.Process.Kill(); <-g.ended })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := Start(Program{Path: self, Args: []string{"watchdog-of", strconv.Itoa(g.cmd.Process.Pid), "--"}}, cgroupDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wd.Stop(); syscall.Wait4(wd.Pid(), nil, 0, nil) })
	return g, wd
}

func waitEnded(t *testing.T, g *guarded, within time.Duration) {
	t.Helper()
	select {
	case <-g.ended:
	case <-time.After(within):
		t.Fatalf("the guarded process tree outlived the watchdog's deadline by %v", within)
	}
}

// Once told that the command runs, a deadline that passes kills the
// command's tree but leaves lockrun, frozen or not, to report the loss.
func TestWatchdogKillsTheCommandByItsDeadline(t *testing.T) {
	g, wd := guardedBy(t, "")
	if err := wd.Guard(clock.Boot.Now().Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	if err := wd.Started(os.Getpid()+1<<22, clock.Boot.Now().Add(200*time.Millisecond)); err != nil { // a group that does not exist
		t.Fatal(err)
	}
	waitEnded(t, g, 10*time.Second) // sh's wait ends when its sleep is SIGKILLed
	if g.killed() {
		t.Error("the watchdog killed lockrun, which had started the command")
	}
}

// A deadline that passes before lockrun said the command started means
// lockrun was frozen between the grant and the exec: the watchdog kills
// lockrun too, so it can never start the command once it wakes, late. The
// first deadline, which Guard sends, must suffice: a frozen lockrun never
// runs the goroutine that writes the others.
func TestAPassedStartDeadlineKillsLockrun(t *testing.T) {
	g, wd := guardedBy(t, "")
	if err := wd.Guard(clock.Boot.Now().Add(200*time.Millisecond), nil); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, g, 10*time.Second)
	if !g.killed() {
		t.Errorf("lockrun ended with %v; want the watchdog's SIGKILL", g.cmd.ProcessState)
	}
}

// A lockrun frozen just after the exec, before it could tell the
// watchdog: the command (a child of lockrun leading its own group) is
// killed as a started one is, and lockrun is left to report the loss.
func TestAPassedStartDeadlineAfterTheExecKillsTheCommandOnly(t *testing.T) {
	g, wd := guardedByScript(t, "", "setsid sleep 30 & wait")
	if err := wd.Guard(clock.Boot.Now().Add(200*time.Millisecond), nil); err != nil {
		t.Fatal(err)
	}
	waitEnded(t, g, 10*time.Second) // sh's wait ends when its sleep is SIGKILLed
	if g.killed() {
		t.Error("the watchdog killed lockrun, which had started the command")
	}
}

// A watchdog started for a lock that never came guards nothing: dismissed,
// it removes the command's (empty) cgroup, exits at once and kills no one.
func TestUnarmedWatchdogLeavesQuietly(t *testing.T) {
	cgroup := filepath.Join(t.TempDir(), "cgroup") // rmdir treats it as it would a cgroup
	if err := os.Mkdir(cgroup, 0o755); err != nil {
		t.Fatal(err)
	}
	g, wd := guardedBy(t, cgroup)
	wd.Dismiss()
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(wd.Pid(), &ws, 0, nil); err != nil || ws.ExitStatus() != 0 {
		t.Fatalf("dismissed watchdog: %v, status %v; want exit 0", err, ws)
	}
	if _, err := os.Stat(cgroup); !os.IsNotExist(err) {
		t.Errorf("the cgroup made for a command that never started is still there (%v)", err)
	}
	select {
	case <-g.ended:
		t.Fatal("a watchdog that was never armed killed the command")
	case <-time.After(100 * time.Millisecond):
	}
}

// The watchdog holds the lock's files it was sent: a flock stays held
// after lockrun closes its own descriptor, until the watchdog exits.
func TestWatchdogHoldsTheLocksFiles(t *testing.T) {
	_, wd := guardedBy(t, "")
	path := filepath.Join(t.TempDir(), "lock")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := wd.Guard(clock.Boot.Now().Add(time.Minute), []*os.File{f}); err != nil {
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
	wd.Dismiss() // armed: it kills the guarded shell's tree, then exits
	syscall.Wait4(wd.Pid(), nil, 0, nil)
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the flock outlived the watchdog: %v", err)
	}
}

// A lockrun frozen or killed just after starting the command may not have
// told its watchdog the command's group yet: the watchdog must find the
// command among lockrun's descendants all the same.
func TestKillTreeFindsACommandItWasNotToldOf(t *testing.T) {
	cmd := exec.Command("/bin/sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	died := make(chan error, 1)
	go func() { died <- cmd.Wait() }()
	killTree(0, os.Getpid(), "")
	select {
	case err := <-died:
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("command ended with %v, want SIGKILL", err)
		}
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the command outlived the watchdog's kill")
	}
}

func TestMainRefusesBadArguments(t *testing.T) {
	t.Setenv(envProtocol, protocol) // as Start sets it
	for _, args := range [][]string{nil, {"x"}, {"0"}, {"1", "a", "b"}} {
		if err := Main(os.Stdin, args); err != ErrUsage {
			t.Errorf("Main(%q) = %v, want ErrUsage", strings.Join(args, " "), err)
		}
	}
}
