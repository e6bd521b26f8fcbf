// Package examples holds runnable examples of lockrun in cron, CI (a shell
// step, GitHub Actions, GitLab CI), systemd and a fenced backfill; the
// tests run each one as written.
package examples

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/etcdtest"
	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// command is a shell running a command line from the repository root,
// with lockrun on PATH and LOCKRUN_BACKEND set to the test's backend (as
// the crontab or unit would set it to the fleet's).
func command(t *testing.T, backend, line string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", line, "sh"}, args...)...)
	cmd.Dir = ".."
	binDir := filepath.Dir(lockruntest.Binary(t))
	cmd.Env = append(os.Environ(), "PATH="+binDir+":"+os.Getenv("PATH"), "LOCKRUN_BACKEND="+backend)
	return cmd
}

// shell runs command to its end and returns its output and status.
func shell(t *testing.T, backend, line string, args ...string) (string, int) {
	t.Helper()
	out, err := command(t, backend, line, args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// hold keeps key busy until the test ends.
func hold(t *testing.T, backend, key string) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(lockruntest.Binary(t), "run", key, "--", "sh", "-c", "echo > "+ready+"; sleep 60")
	cmd.Env = append(os.Environ(), "LOCKRUN_BACKEND="+backend)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("holder did not start")
		}
	}
}

// line returns the first line of file that starts with prefix, without it.
func line(t *testing.T, file, prefix string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, prefix) {
			return strings.TrimPrefix(l, prefix)
		}
	}
	t.Fatalf("%s has no line starting with %q", file, prefix)
	return ""
}

// installed is how the test installs the examples: lockrun, and the
// examples' scripts, where the crontab and the unit expect them.
func installed(t *testing.T) *strings.Replacer {
	t.Helper()
	binDir := filepath.Dir(lockruntest.Binary(t))
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer("/usr/local/bin/", binDir+"/", "/usr/local/bin:", binDir+":", "/usr/local/lib/lockrun-examples/", here+"/")
}

// asCron runs line as cron does: /bin/sh -c from $HOME (another
// directory), with cron's PATH=/usr/bin:/bin and nothing else of the
// test's environment, then the variables env sets in order, as crontab
// lines do.
func asCron(t *testing.T, env []string, line string) (string, int) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Dir = home
	cmd.Env = append([]string{"HOME=" + home, "LOGNAME=root", "SHELL=/bin/sh", "PATH=/usr/bin:/bin"}, env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// crontab reads the example crontab as cron would: its variable lines,
// with the install paths of the test and the test's backend, and its one
// entry's command.
func crontab(t *testing.T, backend string) (env []string, entry string) {
	t.Helper()
	b, err := os.ReadFile("crontab")
	if err != nil {
		t.Fatal(err)
	}
	install := installed(t)
	for _, l := range strings.Split(string(b), "\n") {
		switch fields := strings.Fields(l); {
		case len(fields) == 0 || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "LOCKRUN_BACKEND="):
			env = append(env, "LOCKRUN_BACKEND="+backend)
		case strings.Contains(fields[0], "="):
			env = append(env, install.Replace(l))
		default:
			entry = install.Replace(strings.Join(fields[5:], " "))
		}
	}
	return env, entry
}

func TestCrontab(t *testing.T) {
	fleet := redistest.Start(t).URL()
	env, entry := crontab(t, fleet)
	if !strings.Contains(entry, "--min-hold") {
		t.Errorf("the fleet's crontab entry has no --min-hold: hosts whose cron fires later run the job again")
	}
	if out, code := asCron(t, env, entry); code != 0 || !strings.Contains(out, "report run") {
		t.Errorf("free lock: exit %d, output %q", code, out)
	}
	// Another host, a moment later: the minimum hold keeps the lock.
	if out, code := asCron(t, env, entry); code != 0 || out != "" {
		t.Errorf("second host in the minimum hold: exit %d, output %q; want 0 and silence for cron", code, out)
	}
	key := "nightly-report"
	if out, code := shell(t, fleet, "lockrun release -q "+key); code != 0 {
		t.Fatalf("release: %d %s", code, out)
	}
	hold(t, fleet, key)
	if out, code := asCron(t, env, entry); code != 0 || out != "" {
		t.Errorf("busy lock: exit %d, output %q; want 0 and silence for cron", code, out)
	}
}

// Two pipelines deploy at once: their lines, appended to one log as they
// are printed, must not interleave.
func TestCIDeploysQueueUp(t *testing.T) {
	fleet := redistest.Start(t).URL()
	log, err := os.OpenFile(filepath.Join(t.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var wg sync.WaitGroup
	for range 2 {
		cmd := command(t, fleet, "examples/ci-deploy.sh staging")
		cmd.Stdout, cmd.Stderr = log, log
		wg.Go(func() {
			if err := cmd.Run(); err != nil {
				t.Errorf("deploy: %v", err)
			}
		})
	}
	wg.Wait()
	out, _ := os.ReadFile(log.Name())
	var lines []string
	waited := false
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(l, "lockrun: waiting for lock \"deploy-staging\", held by ci-job-") {
			waited = true // the pipeline that waits says for whom
			continue
		}
		lines = append(lines, l)
	}
	if !waited {
		t.Errorf("the waiting pipeline did not say whom it waits for:\n%s", out)
	}
	want := []string{"deploying", "deployed", "deploying", "deployed"}
	if len(lines) != len(want) {
		t.Fatalf("deploy log:\n%s", out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Fatalf("deploys overlapped:\n%s", out)
		}
	}
}

func TestSystemdService(t *testing.T) {
	start := installed(t).Replace(line(t, "systemd/report.service", "ExecStart="))
	if line(t, "systemd/report.service", "SuccessExitStatus=") != "75" {
		t.Error("the unit does not treat a busy lock (75) as success")
	}
	fleet := etcdtest.Start(t).URL()
	env := []string{"LOCKRUN_BACKEND=" + fleet}
	if out, code := asCron(t, env, start); code != 0 || !strings.Contains(out, "report run") {
		t.Errorf("ExecStart: exit %d, output %q", code, out)
	}
	if out, code := asCron(t, env, start); code != 75 {
		t.Errorf("ExecStart in the minimum hold: exit %d, output %q; want 75", code, out)
	}
}
