package e2e_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/procfs"
)

// terminal is a pseudo-terminal whose other end is lockrun's controlling
// terminal, as in an operator's shell session.
type terminal struct {
	master *os.File
	mu     sync.Mutex
	out    bytes.Buffer
}

func openTerminal(t *testing.T) (*terminal, *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{master: master}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { master.Close(); slave.Close() })
	return term, slave
}

func (term *terminal) waitFor(t *testing.T, s string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		term.mu.Lock()
		ok := strings.Contains(term.out.String(), s)
		term.mu.Unlock()
		if ok {
			return
		}
	}
	term.mu.Lock()
	defer term.mu.Unlock()
	t.Fatalf("terminal never showed %q; it shows %q", s, term.out.String())
}

// startOnTerminal starts lockrun as a session leader on tty, in the
// foreground as a shell would run it.
func startOnTerminal(t *testing.T, tty *os.File, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(lockruntest.Binary(t), args...)
	cmd.Env = env(t)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func TestInteractiveCommandReadsTheTerminal(t *testing.T) {
	term, tty := openTerminal(t)
	cmd := startOnTerminal(t, tty, "run", "backfill", "--", "sh", "-c", `printf 'proceed? [y/N] '; read answer; echo "answer=$answer"`)
	term.waitFor(t, "proceed? [y/N] ")
	term.master.WriteString("y\n")
	term.waitFor(t, "answer=y")
	if code := exitCode(t, cmd); code != 0 {
		t.Errorf("exit %d", code)
	}
}

func TestCtrlCReachesTheCommand(t *testing.T) {
	term, tty := openTerminal(t)
	cmd := startOnTerminal(t, tty, "run", "backfill", "--", "sh", "-c", `echo ready; sleep 30`)
	term.waitFor(t, "ready")
	term.master.Write([]byte{3}) // ^C
	if code := exitCode(t, cmd); code != 130 {
		t.Errorf("exit %d after ^C, want 130", code)
	}
}

// state is the one-letter state of pid (R, S, T, Z...).
func state(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return f[0]
}

// waitExec waits until a descendant of pid runs name: dash starts a
// command with vfork, and a ^Z that stops the child before its exec
// leaves the shell blocked in vfork, never stopped.
func waitExec(t *testing.T, pid int, name string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		for _, d := range procfs.Descendants(pid) {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", d)); strings.TrimSpace(string(comm)) == name {
				return
			}
		}
	}
	t.Fatalf("no descendant of %d runs %s", pid, name)
}

// Ctrl-Z stops the command and lockrun with it, so that the shell gets the
// terminal back; continued, lockrun gives the command the terminal again.
func TestCtrlZSuspendsLikeAShellJob(t *testing.T) {
	term, tty := openTerminal(t)
	cmd := startOnTerminal(t, tty, "run", "--ttl", "10s", "backfill", "--", "sh", "-c", `echo ready; sleep 30`)
	term.waitFor(t, "ready")
	waitExec(t, cmd.Process.Pid, "sleep")
	term.master.Write([]byte{26}) // ^Z
	for deadline := time.Now().Add(5 * time.Second); state(cmd.Process.Pid) != "T"; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lockrun did not stop with its command (state %q)", state(cmd.Process.Pid))
		}
	}
	syscall.Kill(cmd.Process.Pid, syscall.SIGCONT) // fg, as far as lockrun can tell
	for deadline := time.Now().Add(5 * time.Second); state(cmd.Process.Pid) == "T"; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("lockrun did not continue")
		}
	}
	time.Sleep(100 * time.Millisecond)
	term.master.Write([]byte{3}) // ^C reaches the continued command in the foreground
	if code := exitCode(t, cmd); code != 130 {
		t.Errorf("exit %d after ^Z, fg, ^C; want 130", code)
	}
}
