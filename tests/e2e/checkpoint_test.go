package e2e_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// withLockrun is e plus LR, the binary's path, for command lines that call
// lockrun from inside the command.
func withLockrun(t *testing.T, e []string) []string {
	return append(e, "LR="+lockruntest.Binary(t))
}

// A backfill's resume, as the user writes it: read the checkpoint, do the
// next step, store it; a second run continues from the first one's record.
func TestCheckpointCarriesProgressToTheNextRun(t *testing.T) {
	backends := map[string]string{"file": "file://" + t.TempDir(), "redis": redistest.Start(t).URL()}
	for name, url := range backends {
		t.Run(name, func(t *testing.T) {
			e := withLockrun(t, withBackend(url))
			step := `n=$("$LR" checkpoint get); n=${n:-0}; "$LR" checkpoint set $((n+1)) && "$LR" fence check && echo "step $((n+1))"`
			for want := range []string{"step 1", "step 2"} {
				r := run(t, e, "run", "job", "--", "sh", "-c", step)
				if r.Code != 0 || strings.TrimSpace(r.Stdout) != []string{"step 1", "step 2"}[want] {
					t.Fatalf("run %d: exit %d, stdout %q, stderr %q", want+1, r.Code, r.Stdout, r.Stderr)
				}
			}
			if r := run(t, e, "checkpoint", "get", "job"); r.Code != 0 || r.Stdout != "2" {
				t.Errorf("operator get: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
			}
			if r := run(t, e, "checkpoint", "clear", "job"); r.Code != 0 {
				t.Errorf("operator clear: exit %d, stderr %q", r.Code, r.Stderr)
			}
			if r := run(t, e, "checkpoint", "get", "job"); r.Code != 0 || r.Stdout != "" || !strings.Contains(r.Stderr, "no checkpoint") {
				t.Errorf("get after clear: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
			}
		})
	}
}

// A holder revoked by 'lockrun release' gets SIGTERM; its trap tries a last
// checkpoint and a fence check, which its lockrun must refuse with 76.
func TestRevokedHoldersLateCheckpointIsRefused(t *testing.T) {
	dir := t.TempDir()
	e := withLockrun(t, env(t))
	ready, late := filepath.Join(dir, "ready"), filepath.Join(dir, "late")
	script := `"$LR" checkpoint set mine
trap '"$LR" checkpoint set late; a=$?; "$LR" fence check; echo "$a $?" > ` + late + `; exit 1' TERM
echo > ` + ready + `; while :; do sleep 0.05; done`
	holder := start(t, e, "run", "--ttl", "2s", "--kill-grace", "1s", "k", "--", "sh", "-c", script)
	waitFile(t, ready)
	if r := run(t, e, "release", "k"); r.Code != 0 {
		t.Fatalf("release: exit %d, %s", r.Code, r.Stderr)
	}
	if code := exitCode(t, holder); code != 76 {
		t.Errorf("revoked holder: exit %d, want 76", code)
	}
	if got := waitFile(t, late); got != "76 76" {
		t.Errorf("late checkpoint set and fence check exited %q, want \"76 76\"", got)
	}
	if r := run(t, e, "checkpoint", "get", "k"); r.Stdout != "mine" {
		t.Errorf("checkpoint after the refused write: %q, want %q", r.Stdout, "mine")
	}
}

func TestControlSocketIsPrivateAndGone(t *testing.T) {
	r := run(t, env(t), "run", "k", "--", "sh", "-c", `echo "$LOCKRUN_CONTROL"`)
	sock := strings.TrimSpace(r.Stdout)
	if r.Code != 0 || !strings.HasPrefix(sock, "@lockrun-") {
		t.Fatalf("exit %d, LOCKRUN_CONTROL %q: %s; want an abstract socket (nothing in the file system to leave)", r.Code, sock, r.Stderr)
	}
	if bound, err := os.ReadFile("/proc/net/unix"); err != nil || strings.Contains(string(bound), sock) {
		t.Errorf("control socket %s still bound after the run (%v)", sock, err)
	}
	for _, args := range [][]string{{"checkpoint", "set", "x"}, {"fence", "check"}, {"checkpoint", "get"}} {
		if r := run(t, env(t), args...); r.Code != 64 || !strings.Contains(r.Stderr, "LOCKRUN_CONTROL") {
			t.Errorf("%v outside a run: exit %d, %q; want 64", args, r.Code, r.Stderr)
		}
	}
	for _, args := range [][]string{{"checkpoint"}, {"fence"}, {"checkpoint", "clear"}, {"checkpoint", "set"}} {
		if r := run(t, env(t), args...); r.Code != 64 {
			t.Errorf("%v: exit %d, want 64", args, r.Code)
		}
	}
}

// A checkpoint may hold anything: piped, it is printed as stored; to a
// terminal, escaped on one line, so it cannot drive the terminal.
func TestCheckpointIsEscapedOnATerminal(t *testing.T) {
	e := env(t)
	value := "a\x1b[31mred\nb"
	if r := run(t, e, "run", "k", "--", lockruntest.Binary(t), "checkpoint", "set", value); r.Code != 0 {
		t.Fatalf("set: exit %d, %s", r.Code, r.Stderr)
	}
	if r := run(t, e, "checkpoint", "get", "k"); r.Stdout != value {
		t.Errorf("piped get: %q, want %q", r.Stdout, value)
	}
	term, tty := openTerminal(t)
	cmd := exec.Command(lockruntest.Binary(t), "checkpoint", "get", "k")
	cmd.Env, cmd.Stdout, cmd.Stderr = e, tty, tty
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	term.waitFor(t, `a\x1b[31mred\nb`)
	term.mu.Lock()
	defer term.mu.Unlock()
	if strings.Contains(term.out.String(), "\x1b") {
		t.Errorf("the terminal got a raw escape: %q", term.out.String())
	}
}
