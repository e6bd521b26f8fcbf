package e2e_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
)

// hold keeps key busy as holder until the test ends (or the returned
// command is waited for), running sleep for secs.
func hold(t *testing.T, e []string, key, holder, secs string) *exec.Cmd {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := start(t, e, "run", "--holder", holder, key, "--", "sh", "-c", "echo > "+ready+"; sleep "+secs)
	waitFile(t, ready)
	return cmd
}

// -v is --verbose before or after the command name, never the version:
// `lockrun -v run` once printed the version and ran nothing, exit 0.
func TestVerboseMeansVerboseEverywhere(t *testing.T) {
	e := env(t)
	for _, args := range [][]string{{"-v", "run", "k", "--", "echo", "hi"}, {"run", "-v", "k", "--", "echo", "hi"}} {
		r := run(t, e, args...)
		if r.Code != 0 || r.Stdout != "hi\n" || !strings.Contains(r.Stderr, "lock acquired") ||
			!strings.Contains(r.Stderr, "command ended") || !strings.Contains(r.Stderr, `how="exited 0"`) {
			t.Errorf("lockrun %q: exit %d, stdout %q, stderr %q; want the command run, verbosely", args, r.Code, r.Stdout, r.Stderr)
		}
	}
	r := run(t, e, "run", "-v", "k", "--", "sh", "-c", "exit 3")
	if r.Code != 3 || !strings.Contains(r.Stderr, `how="exited 3"`) || !strings.Contains(r.Stderr, "ran=") {
		t.Errorf("-v with a failing command: exit %d, stderr %q; want 3, how long it ran and how it exited", r.Code, r.Stderr)
	}
	for _, flag := range []string{"-V", "--version"} {
		if r := run(t, e, flag); r.Code != 0 || !strings.HasPrefix(r.Stdout, "lockrun version ") {
			t.Errorf("lockrun %s: exit %d, %q", flag, r.Code, r.Stdout)
		}
	}
}

// flock users type seconds: every duration flag takes a bare number.
func TestBareNumbersAreSeconds(t *testing.T) {
	e := env(t)
	if r := run(t, e, "run", "--ttl", "10", "--heartbeat", "2.5", "--kill-grace", "1", "--min-hold", "0.1", "held-a-moment", "--", "sh", "-c", "echo $LOCKRUN_TTL"); r.Code != 0 || r.Stdout != "10s\n" {
		t.Errorf("--ttl 10: exit %d, stdout %q, stderr %q; want a 10s lease", r.Code, r.Stdout, r.Stderr)
	}
	hold(t, e, "k", "worker-7", "30")
	began := time.Now()
	r := run(t, append(e, "LOCKRUN_TIMEOUT=0.3"), "run", "k", "--", "true")
	if took := time.Since(began); r.Code != 75 || took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("LOCKRUN_TIMEOUT=0.3: exit %d after %v, stderr %q", r.Code, took, r.Stderr)
	}
	if r := run(t, e, "run", "--timeout", "soon", "k", "--", "true"); r.Code != 64 || !strings.Contains(r.Stderr, "want seconds (10) or a duration (1m30s)") {
		t.Errorf("--timeout soon: exit %d, %q", r.Code, r.Stderr)
	}
}

// JSON logs give durations in seconds, and a busy lock's holder a field.
func TestJSONLogsGiveSecondsAndTheHolder(t *testing.T) {
	e := env(t)
	r := run(t, e, "run", "-v", "--log-format", "json", "--ttl", "30", "k", "--", "true")
	if r.Code != 0 || !strings.Contains(r.Stderr, `"ttl":30,`) || strings.Contains(r.Stderr, "30000000000") {
		t.Errorf("JSON log: exit %d, %q; want \"ttl\":30 (seconds)", r.Code, r.Stderr)
	}
	hold(t, e, "k", "worker-7", "30")
	r = run(t, e, "run", "--log-format", "json", "k", "--", "true")
	if r.Code != 75 || !strings.Contains(r.Stderr, `"holder":"worker-7"`) || !strings.Contains(r.Stderr, `"exit_code":75`) {
		t.Errorf("busy in JSON: exit %d, %q; want the holder in a field of its own", r.Code, r.Stderr)
	}
}

// Each command's help lists what applies to it.
func TestHelpListsWhatApplies(t *testing.T) {
	e := env(t)
	for _, c := range []struct {
		args     []string
		has, not []string
	}{
		{[]string{"status", "--help"}, []string{"0 the lock is held, 1 it is free", "exit status only"}, []string{"busy", "conflict-exit-code"}},
		{[]string{"release", "--help"}, []string{"--yes", "1 it was free"}, []string{"busy", "min-hold"}},
		{[]string{"init", "--help"}, []string{"--backend"}, []string{"busy"}},
		{[]string{"list", "--help"}, []string{"PREFIX", "--json"}, []string{"busy"}},
		{[]string{"run", "--help"}, []string{"--min-hold", "77 permission", "78 backend configuration", "--log value", "syslog"}, nil},
		{[]string{"--help"}, []string{"list", "-V"}, nil},
	} {
		r := run(t, e, c.args...)
		for _, w := range c.has {
			if !strings.Contains(r.Stdout, w) {
				t.Errorf("lockrun %q lacks %q:\n%s", c.args, w, r.Stdout)
			}
		}
		for _, w := range c.not {
			if strings.Contains(r.Stdout, w) {
				t.Errorf("lockrun %q mentions %q, which does not apply:\n%s", c.args, w, r.Stdout)
			}
		}
	}
}

// datagrams listens on a new datagram socket and returns its path and a
// function that returns what it received so far.
func datagrams(t *testing.T) (string, func() []string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "log")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var mu sync.Mutex
	var got []string
	go func() {
		buf := make([]byte, 65536)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			mu.Lock()
			got = append(got, string(buf[:n]))
			mu.Unlock()
		}
	}()
	return sock, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// eventually waits up to 5s for ok to hold for what received returns.
func eventually(t *testing.T, received func() []string, ok func([]string) bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok(received()) {
			return
		}
	}
	t.Errorf("the log got %q; want %s", received(), what)
}

// --log syslog:PATH sends lockrun's lines to a syslog socket, tagged and
// at their priority, and leaves stderr to the command; an unreachable one
// costs a warning, not the job.
func TestLogToSyslog(t *testing.T) {
	sock, received := datagrams(t)
	e := env(t)
	if r := run(t, e, "run", "-v", "--log", "syslog:"+sock, "k", "--", "sh", "-c", "echo out; echo err >&2"); r.Code != 0 || r.Stderr != "err\n" || r.Stdout != "out\n" {
		t.Errorf("run with --log syslog: exit %d, stdout %q, stderr %q; want the command's own lines only", r.Code, r.Stdout, r.Stderr)
	}
	if r := run(t, e, "run", "--log", "syslog:/nonexistent/log", "k", "--", "echo", "ran"); r.Code != 0 || r.Stdout != "ran\n" ||
		!strings.HasPrefix(r.Stderr, "lockrun: warning: --log syslog: cannot reach /nonexistent/log") {
		t.Errorf("unreachable syslog: exit %d, stdout %q, stderr %q; want the job run and one warning on stderr", r.Code, r.Stdout, r.Stderr)
	}
	hold(t, e, "k", "worker-7", "30")
	if r := run(t, e, "run", "--log", "syslog:"+sock, "k", "--", "true"); r.Code != 75 || r.Stderr != "" {
		t.Errorf("busy with --log syslog: exit %d, stderr %q", r.Code, r.Stderr)
	}
	eventually(t, received, func(got []string) bool {
		var debug, busy bool // user.debug (15) about the grant, user.err (11) naming the holder
		for _, m := range got {
			debug = debug || strings.HasPrefix(m, "<15>") && strings.Contains(m, "lockrun[") && strings.Contains(m, "lock acquired")
			busy = busy || strings.HasPrefix(m, "<11>") && strings.Contains(m, "held by worker-7")
		}
		return debug && busy
	}, "a debug line about the grant and an error naming the holder")
}

// --log journald:PATH sends native journal records: the message, its
// priority and lockrun's identifier as fields.
func TestLogToJournald(t *testing.T) {
	sock, received := datagrams(t)
	e := env(t)
	hold(t, e, "k", "worker-7", "30")
	if r := run(t, e, "run", "-v", "--log", "journald:"+sock, "k", "--", "true"); r.Code != 75 || r.Stderr != "" {
		t.Errorf("busy with --log journald: exit %d, stderr %q", r.Code, r.Stderr)
	}
	eventually(t, received, func(got []string) bool {
		for _, m := range got {
			if strings.Contains(m, "\nPRIORITY=3\n") && strings.Contains(m, "SYSLOG_IDENTIFIER=lockrun\n") &&
				strings.HasPrefix(m, "MESSAGE=") && strings.Contains(m, "held by worker-7") {
				return true
			}
		}
		return false
	}, "an error record (PRIORITY=3) from lockrun naming the holder")
}

// A waiter says whom it waits for, and with -v how long it waited.
func TestWaiterSaysWhomItWaitsFor(t *testing.T) {
	e := env(t)
	holder := hold(t, e, "k", "worker-7", "1")
	r := run(t, e, "run", "-v", "--wait", "k", "--", "true")
	if r.Code != 0 || !strings.Contains(r.Stderr, `waiting for lock "k", held by worker-7 since `) ||
		!strings.Contains(r.Stderr, "lock granted after waiting") || !strings.Contains(r.Stderr, "waited=") {
		t.Errorf("waiter: exit %d, stderr %q", r.Code, r.Stderr)
	}
	exitCode(t, holder)
	if r := run(t, e, "run", "-q", "--wait", "k", "--", "true"); r.Code != 0 || r.Stderr != "" {
		t.Errorf("quiet waiter: exit %d, stderr %q", r.Code, r.Stderr)
	}
}

// A JSON waiter's record names what the backend knows of the holder and
// nothing it does not: a lock held by flock(1) has no token, not token 0.
func TestJSONWaiterOmitsWhatItDoesNotKnow(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	holder := exec.Command("flock", filepath.Join(dir, "k.lock"), "sh", "-c", "touch "+ready+"; exec sleep 30")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("flock(1) did not take the lock")
		}
	}
	e := append(os.Environ(), "LOCKRUN_BACKEND=file://"+dir)
	r := run(t, e, "run", "--log-format", "json", "--timeout", "0.3", "k", "--", "true")
	waiting, _, _ := strings.Cut(r.Stderr, "\n")
	if r.Code != 75 || !strings.Contains(waiting, `"holder":"a process that is not lockrun: pid `) || strings.Contains(waiting, `"token"`) {
		t.Errorf("exit %d, first record %s", r.Code, waiting)
	}
}

// startOn starts lockrun with environment e on the terminal tty, in the
// foreground as a shell would.
func startOn(t *testing.T, tty *os.File, e []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(lockruntest.Binary(t), args...)
	cmd.Env = e
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// On a terminal, release shows the holder and asks; no keeps the lock.
func TestReleaseAsksOnATerminal(t *testing.T) {
	e := env(t)
	holder := hold(t, e, "k", "worker-7", "30")
	term, tty := openTerminal(t)
	cmd := startOn(t, tty, e, "release", "k")
	term.waitFor(t, "Break this lock?")
	term.waitFor(t, "held by worker-7")
	term.master.WriteString("n\n")
	if code := exitCode(t, cmd); code != 2 {
		t.Errorf("release answered no: exit %d, want 2", code)
	}
	if r := run(t, e, "status", "k"); r.Code != 0 {
		t.Fatalf("after no, the lock is not held: exit %d %q", r.Code, r.Stdout)
	}
	term, tty = openTerminal(t)
	cmd = startOn(t, tty, e, "release", "k")
	term.waitFor(t, "Break this lock?")
	term.master.WriteString("y\n")
	term.waitFor(t, "released the lock of worker-7")
	if code := exitCode(t, cmd); code != 0 {
		t.Errorf("release answered yes: exit %d", code)
	}
	if code := exitCode(t, holder); code != 76 {
		t.Errorf("released holder: exit %d, want 76", code)
	}
}

// On a terminal, a waiter keeps a live line with the time waited.
func TestWaiterShowsALiveLineOnATerminal(t *testing.T) {
	e := env(t)
	hold(t, e, "k", "worker-7", "6") // long enough for a loaded host to show two ticks
	term, tty := openTerminal(t)
	cmd := startOn(t, tty, e, "run", "--wait", "k", "--", "echo", "got it")
	term.waitFor(t, `waiting for lock "k", held by worker-7`)
	term.waitFor(t, "\rlockrun: waiting for lock \"k\": 2s")
	term.waitFor(t, "got it")
	if code := exitCode(t, cmd); code != 0 {
		t.Errorf("waiter exit %d", code)
	}
}

// A waiter stopped by a signal says which, by its name.
func TestWaiterInterruptedNamesTheSignal(t *testing.T) {
	e := env(t)
	hold(t, e, "k", "worker-7", "30")
	errPath := filepath.Join(t.TempDir(), "stderr")
	errFile, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	cmd := exec.Command(lockruntest.Binary(t), "run", "--wait", "k", "--", "true")
	cmd.Env, cmd.Stderr = e, errFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stderr := func() string { b, _ := os.ReadFile(errPath); return string(b) }
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(stderr(), "waiting for lock") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, cmd); code != 143 || !strings.Contains(stderr(), `interrupted by SIGTERM while waiting for lock "k"`) {
		t.Errorf("SIGTERM while waiting: exit %d, stderr %q; want 143 naming SIGTERM", code, stderr())
	}
}
