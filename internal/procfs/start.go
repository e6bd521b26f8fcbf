package procfs

import (
	"os"
	"runtime"
	"syscall"
)

// Start starts path as os.StartProcess does (attr.Env as given, nil
// Files entries closed in the child, failures as *os.PathError), and
// returns its pid, which the caller reaps. It does without the pidfd
// that os.StartProcess opens: the first os.StartProcess of a process
// forks and reaps a throw-away child to check that pidfds work, a fork on
// every lockrun run's way to its command, for a handle lockrun never uses
// (its reaper waits by pid, and signals what it finds through pidfds of
// its own).
func Start(path string, argv []string, attr *os.ProcAttr) (int, error) {
	fds := make([]uintptr, len(attr.Files))
	for i, f := range attr.Files {
		fds[i] = f.Fd() // ^uintptr(0) for nil: closed in the child
	}
	pid, _, err := syscall.StartProcess(path, argv, &syscall.ProcAttr{Dir: attr.Dir, Env: attr.Env, Files: fds, Sys: attr.Sys})
	runtime.KeepAlive(attr.Files) // open until the child has its copies
	if err != nil {
		return 0, &os.PathError{Op: "fork/exec", Path: path, Err: err}
	}
	return pid, nil
}
