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
)

var (
	mu     sync.Mutex
	builds = map[string]string{} // package dir and tags → binary
)

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
	return build(t, dir, "")
}

func build(t testing.TB, dir, tags string) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	pkg := filepath.Join(filepath.Dir(self), "..", "..", dir)
	mu.Lock()
	defer mu.Unlock()
	if bin, ok := builds[pkg+" "+tags]; ok {
		return bin
	}
	out, err := os.MkdirTemp("", "lockrun-bin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(out, filepath.Base(pkg))
	if msg, err := exec.Command("go", "build", "-tags", tags, "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("building %s (tags %q): %v\n%s", pkg, tags, err, msg)
	}
	builds[pkg+" "+tags] = bin
	return bin
}

// Result is how one lockrun run ended.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Run runs lockrun with env (nil: the test's own) and args to its end.
func Run(t testing.TB, env []string, args ...string) Result {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
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

// BuildTags builds the main package in dir (relative to the module root)
// with the build tags given, once per test process and set of tags, and
// returns the binary's path: `BuildTags(t, "cmd/lockrun", "testhooks")`
// is lockrun with its test hooks (see internal/runner/testhook_on.go).
func BuildTags(t testing.TB, dir string, tags ...string) string {
	t.Helper()
	return build(t, dir, strings.Join(tags, ","))
}
