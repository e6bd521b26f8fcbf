package procfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Start gives the child the environment and files it is given (a nil
// file closed), returns a pid to reap, and fails as os.StartProcess does.
func TestStartRunsAndFailsAsStartProcess(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	script := `echo "$X"; if [ -e /proc/$$/fd/2 ]; then echo fd2-open; fi; exit 3`
	pid, err := Start("/bin/sh", []string{"sh", "-c", script}, &os.ProcAttr{
		Env: []string{"X=given"}, Files: []*os.File{nil, f, nil}, Sys: &syscall.SysProcAttr{},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || ws.ExitStatus() != 3 {
		t.Fatalf("wait4(%d): %v, status %v; want exit 3", pid, err, ws)
	}
	if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != "given" {
		t.Errorf("the child wrote %q; want its environment's X, and fd 2 closed", b)
	}
	_, err = Start("/no/such/program", []string{"x"}, &os.ProcAttr{Sys: &syscall.SysProcAttr{}})
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Path != "/no/such/program" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing program: %v; want an *os.PathError for it wrapping ENOENT", err)
	}
}
