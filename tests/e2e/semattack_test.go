package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
)

// Attacks on semaphores (run --limit N) through the binary, found by a
// hostile-tester pass; each test failed on the build it was written for.

// stubbornScript is a holder's command: it ignores SIGTERM (as sleep does
// after the exec), writes its pid and token to $1 and sleeps until killed.
const stubbornScript = `trap '' TERM; echo "$$ $LOCKRUN_FENCING_TOKEN" > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 60`

// lateScript is a waiter's command: the moment it starts it writes to $1
// whether the process $2 (the broken holder's command) is still alive:
// present in /proc and not a zombie.
const lateScript = `s=$(cut -d' ' -f3 "/proc/$2/stat" 2>/dev/null); ` +
	`if [ -n "$s" ] && [ "$s" != Z ]; then echo "alive $s" > "$1"; else echo dead > "$1"; fi`

// startSem starts lockrun run --limit 2 --ttl 6 on key "frz" with extra
// flags and the command script args; its stderr goes to a file beside
// out, which it returns with the run.
func startSem(t *testing.T, e []string, script string, extra []string, args ...string) *exec.Cmd {
	t.Helper()
	f, err := os.Create(args[0] + ".stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := append(append([]string{"run", "--limit", "2", "--ttl", "6"}, extra...), "frz", "--", "sh", "-c", script, "sh")
	cmd := exec.Command(lockruntest.Binary(t), append(a, args...)...)
	cmd.Env, cmd.Stderr = e, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// pidToken waits for a holder's "PID TOKEN" file.
func pidToken(t *testing.T, cmd *exec.Cmd, path string) (pid int, token string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && alive(cmd.Process.Pid); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		p, tok, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		if pid, err = strconv.Atoi(p); err == nil && tok != "" {
			return pid, tok
		}
	}
	said, _ := os.ReadFile(path + ".stderr")
	t.Fatalf("the holder's command never ran: %q", said)
	return 0, ""
}

// A slot broken with release --revoke --holder must not go to a waiter before the
// broken holder's command is dead: the promise is that a lost slot's
// command is dead before anyone else can be granted the slot. The holder's
// command ignores SIGTERM, so a live lockrun kills it at its next renewal
// plus the kill grace; a frozen one (SIGSTOP: it cannot hear of the break)
// leaves it to its watchdog, up to a TTL. On the file backend the slot's
// flock, which the command holds, keeps the slot until it dies. Before
// --revoke (backend.Revoker), every server backend granted the waiter at
// once, with the broken holder's command still alive: three commands of
// --limit 2 at once (as a plain release still does).
func TestReleasedSlotWaitsForItsCommand(t *testing.T) {
	lockruntest.Binary(t)
	for _, srv := range everyBackend() {
		for _, frozen := range []bool{false, true} {
			name := srv.name + "/live"
			if frozen {
				name = srv.name + "/frozen"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				releasedSlot(t, envFor(srv.url(t)), frozen)
			})
		}
	}
}

// releasedSlot holds both slots of --limit 2, queues a waiter, breaks the
// first holder (after freezing its lockrun if frozen) and fails if the
// waiter's command starts while the broken holder's command lives.
func releasedSlot(t *testing.T, e []string, frozen bool) {
	dir := t.TempDir()
	a := startSem(t, e, stubbornScript, nil, filepath.Join(dir, "a"))
	aPid, aTok := pidToken(t, a, filepath.Join(dir, "a"))
	b := startSem(t, e, stubbornScript, nil, filepath.Join(dir, "b"))
	pidToken(t, b, filepath.Join(dir, "b"))
	late := filepath.Join(dir, "c")
	c := startSem(t, e, lateScript, []string{"--wait"}, late, strconv.Itoa(aPid))
	waitText(t, late+".stderr", "waiting for lock")
	if frozen {
		if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	if r := run(t, e, "release", "--yes", "--revoke", "--holder", aTok, "frz"); r.Code != 0 {
		t.Fatalf("release --revoke --holder %s: exit %d, %q %q", aTok, r.Code, r.Stdout, r.Stderr)
	}
	// Past the holder's TTL its command is dead (killed by its lockrun
	// or its watchdog); the waiter may start then, not before.
	for deadline := time.Now().Add(9 * time.Second); time.Now().Before(deadline) && alive(c.Process.Pid); {
		time.Sleep(10 * time.Millisecond)
	}
	if got, err := os.ReadFile(late); err == nil && strings.HasPrefix(string(got), "alive") {
		t.Fatalf("the waiter's command started while the broken holder's command (pid %d) was %s: "+
			"three commands of --limit 2 at once", aPid, strings.TrimSpace(string(got)))
	}
}

// --limit and --conflict-exit-code are read in decimal: a zero-padded
// "010" from a template is 10, not 8, and Go's other base prefixes (0x10,
// 0b11, 0o7, 1_0) are refused; else one host of a fleet asks for another
// limit than the rest, and they refuse each other (exit 78).
func TestLimitIsDecimal(t *testing.T) {
	e := withLockrun(t, envFor("file://"+t.TempDir()))
	for _, v := range []string{"0x10", "0b11", "0o7", "1_0"} {
		r := run(t, e, "run", "--limit", v, "k", "--", "true")
		if r.Code != 64 || !strings.Contains(r.Stderr, "decimal") {
			t.Errorf("--limit %s: exit %d, stderr %q; want 64 and a line asking for a decimal number", v, r.Code, r.Stderr)
		}
		if r = run(t, append(e, "LOCKRUN_LIMIT="+v), "run", "k", "--", "true"); r.Code != 64 {
			t.Errorf("LOCKRUN_LIMIT=%s: exit %d, stderr %q; want 64", v, r.Code, r.Stderr)
		}
		if r = run(t, e, "run", "--conflict-exit-code", v, "k", "--", "true"); r.Code != 64 {
			t.Errorf("--conflict-exit-code %s: exit %d, stderr %q; want 64", v, r.Code, r.Stderr)
		}
	}
	status := []string{"k", "--", "sh", "-c", `"$LR" status k`}
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{e, append([]string{"run", "--limit", "010"}, status...)},
		{append(e, "LOCKRUN_LIMIT=010"), append([]string{"run"}, status...)},
	} {
		if r := run(t, c.env, c.args...); r.Code != 0 || !strings.HasPrefix(r.Stdout, "k: 1 of 10 held") {
			t.Errorf("%v (LOCKRUN_LIMIT=010 %v): exit %d, stdout %q, stderr %q; want a limit of 10",
				c.args, len(c.env) > len(e), r.Code, r.Stdout, r.Stderr)
		}
	}
}
