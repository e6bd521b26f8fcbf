// Package lockruntest builds the lockrun binary once per test process and
// runs it as a user would, for end-to-end and fault tests of every package.
package lockruntest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/watchdog"
)

var (
	mu     sync.Mutex
	builds = map[string]*build{} // package dir and tags → its build
)

// build is one binary, built once per test process.
type build struct {
	done chan struct{} // closed when bin or err is set
	bin  string
	err  error
}

// Binary returns the path of a lockrun built from this checkout.
func Binary(t testing.TB) string {
	t.Helper()
	return Build(t, "cmd/lockrun")
}

// Build builds the main package in dir (relative to the module root) once per
// test process, without the race detector whatever the test uses, and
// returns the binary's path.
func Build(t testing.TB, dir string) string {
	t.Helper()
	return BuildTags(t, dir)
}

// BuildTags is Build with build tags (such as "testhooks"): each package
// and set of tags is built once per test process.
func BuildTags(t testing.TB, dir string, tags ...string) string {
	t.Helper()
	b := start(dir, tags)
	<-b.done
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// Prebuild starts the build of dir with tags in the background, if it has
// not started yet, so that several builds run at once: Build and BuildTags
// wait for it.
func Prebuild(dir string, tags ...string) { start(dir, tags) }

// start returns the build of dir with tags, starting it if need be.
func start(dir string, tags []string) *build {
	_, self, _, _ := runtime.Caller(0)
	pkg := filepath.Join(filepath.Dir(self), "..", "..", dir)
	key := pkg + " " + strings.Join(tags, ",")
	mu.Lock()
	defer mu.Unlock()
	if b, ok := builds[key]; ok {
		return b
	}
	b := &build{done: make(chan struct{})}
	builds[key] = b
	go func() {
		defer close(b.done)
		b.bin, b.err = compile(pkg, tags)
	}()
	return b
}

// compile builds the main package pkg with tags into a new directory. A
// lockrun gets its watchdog and its server backends' programs beside it,
// as it is installed.
func compile(pkg string, tags []string) (string, error) {
	out, err := os.MkdirTemp("", "lockrun-bin")
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", out + "/"}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	pkgs := []string{pkg}
	if filepath.Base(pkg) == "lockrun" {
		pkgs = append(pkgs, filepath.Join(filepath.Dir(pkg), watchdog.ProgramName))
		for _, prog := range Programs {
			pkgs = append(pkgs, filepath.Join(filepath.Dir(pkg), prog))
		}
	}
	if msg, err := exec.Command("go", append(args, pkgs...)...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", strings.Join(pkgs, " "), err, msg)
	}
	return filepath.Join(out, filepath.Base(pkg)), nil
}

// Programs are the programs with the server backends' clients, which
// lockrun starts in its place for their URLs.
var Programs = []string{"lockrun-redis", "lockrun-etcd", "lockrun-postgres", "lockrun-zookeeper"}

// Result is how one lockrun run ended.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs lockrun with env (nil: the test's own) and args to its end.
func Run(t testing.TB, env []string, args ...string) Result {
	t.Helper()
	return RunBinary(t, Binary(t), env, args...)
}

// RunBinary is Run with another lockrun binary.
func RunBinary(t testing.TB, bin string, env []string, args ...string) Result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	code := 0
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("running lockrun: %v", err)
	}
	return Result{out.String(), errb.String(), code}
}

// Start starts lockrun in the background; it is killed when the test ends.
func Start(t testing.TB, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// ExitCode waits for cmd and returns its exit status.
func ExitCode(t testing.TB, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// WaitLine waits up to 10s for path to hold a complete line, and returns
// the content without its trailing newline.
func WaitLine(t testing.TB, path string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("%s did not appear", path)
	return ""
}

// Alive tells whether pid is running; a zombie is not.
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// WatchdogArgs tells whether pid is a lockrun's watchdog, its own program
// or lockrun re-executed as one ("lockrun watchdog"), and returns its
// arguments after the program's: lockrun's pid, then the command's
// cgroup if it has one.
func WatchdogArgs(pid int) (args []string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	switch {
	case err != nil || len(argv) < 2:
		return nil, false
	case filepath.Base(argv[0]) == watchdog.ProgramName:
		return argv[1:], true
	case argv[1] == watchdog.Subcommand:
		return argv[2:], true
	}
	return nil, false
}
