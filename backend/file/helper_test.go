package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// helperEnv makes the test binary a lockrun of its own, for the tests that
// SIGKILL a holder or a waiter: "DIR KEY LIMIT WAIT CHILD".
const helperEnv = "LOCKRUN_FILE_TEST_HELPER"

// attackEnv makes the test binary another user's lockrun that tries to
// take and break a semaphore's slot: "DIR KEY TOKEN".
const attackEnv = "LOCKRUN_FILE_TEST_ATTACK"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(helper(spec))
	}
	if spec := os.Getenv(attackEnv); spec != "" {
		os.Exit(attack(spec))
	}
	os.Exit(m.Run())
}

// attack says, for each of Acquire, ReleaseHolder and ForceRelease,
// "refused" when it failed with ErrPermission, else what happened.
func attack(spec string) int {
	var dir, key string
	var token uint64
	if _, err := fmt.Sscan(spec, &dir, &key, &token); err != nil {
		fmt.Println("error", err)
		return 2
	}
	b, err := Open(dir)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	say := func(what string, err error) {
		if errors.Is(err, backend.ErrPermission) {
			fmt.Println(what, "refused")
		} else {
			fmt.Println(what, err)
		}
	}
	o := backend.AcquireOptions{TTL: time.Second, Holder: "intruder", RunID: "intruder", Limit: 2}
	_, err = b.Acquire(context.Background(), key, o)
	say("acquire", err)
	say("release", b.ReleaseHolder(context.Background(), key, backend.Token(token)))
	say("force", b.ForceRelease(context.Background(), key))
	return 0
}

// helper takes the lock as the spec says, and with CHILD starts a command
// that inherits the lease's files, as lockrun's command does; it says
// "child PID" and "token T" on stdout, then waits to be killed.
func helper(spec string) int {
	var dir, key string
	var limit int
	var wait, child bool
	if _, err := fmt.Sscan(spec, &dir, &key, &limit, &wait, &child); err != nil {
		fmt.Println("error", err)
		return 2
	}
	b, err := Open(dir)
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	o := backend.AcquireOptions{TTL: time.Second, Holder: "helper", RunID: fmt.Sprint("helper-", os.Getpid()), Limit: limit, Wait: wait}
	l, err := b.Acquire(context.Background(), key, o)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if child {
		cmd := exec.Command("sleep", "60")
		cmd.ExtraFiles = l.(*lease).Files()
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("child", cmd.Process.Pid)
	}
	fmt.Println("token", l.Token())
	select {}
}

// proc is a helper process.
type proc struct {
	cmd *exec.Cmd
	out *bufio.Scanner
}

func startHelper(t *testing.T, dir, key string, limit int, wait, child bool) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d %v %v", helperEnv, dir, key, limit, wait, child))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, out: bufio.NewScanner(out)}
	t.Cleanup(func() { p.kill() })
	return p
}

// line returns the helper's next line that starts with word, failing on
// an error line or after 10 s.
func (p *proc) line(t *testing.T, word string) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		for p.out.Scan() {
			if f := strings.Fields(p.out.Text()); len(f) > 1 && (f[0] == word || f[0] == "error") {
				got <- p.out.Text()
				return
			}
		}
		got <- "error: " + fmt.Sprint(io.EOF)
	}()
	select {
	case l := <-got:
		if strings.HasPrefix(l, "error") {
			t.Fatalf("helper: %s", l)
		}
		return strings.Fields(l)[1]
	case <-time.After(10 * time.Second):
		t.Fatalf("helper said no %q in 10s", word)
	}
	return ""
}

// kill SIGKILLs the helper and waits for it, as a crash of lockrun.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
}

// killPid SIGKILLs pid and waits until it is gone (it is not our child).
func killPid(t *testing.T, pid int) {
	t.Helper()
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(b), ") Z ") {
			return // a zombie holds no file
		}
	}
	t.Fatalf("pid %d still alive 5s after SIGKILL", pid)
}
