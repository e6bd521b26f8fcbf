package app

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/lockrun/lockrun/backend"
	"golang.org/x/sys/unix"
)

// programs names, for each server backend's URL scheme, the program that
// has its client in it. lockrun itself has only the file backend's: no run
// pays, at every start, for the package init and the memory of clients it
// does not use (in one binary they were half of a run's time on the file
// backend: see docs/performance.md).
var programs = map[string]string{
	"redis": "lockrun-redis", "rediss": "lockrun-redis", "redlock": "lockrun-redis", "redlocks": "lockrun-redis",
	"etcd": "lockrun-etcd", "etcds": "lockrun-etcd",
	"postgres": "lockrun-postgres", "postgresql": "lockrun-postgres",
	"zk": "lockrun-zookeeper", "zks": "lockrun-zookeeper",
}

// delegatedVar marks a program started by execProgram with the starting
// program's version: one of another release (an upgrade half done)
// refuses, as lockrun-watchdog does, and a started lockrun does not
// dispatch again. Main removes it from the environment before
// anything else: the command never sees it.
const delegatedVar = "LOCKRUN_DELEGATED"

// takeDelegation removes delegatedVar from the environment; a program
// started by one of another release is an error.
func (st *state) takeDelegation() error {
	from, ok := os.LookupEnv(delegatedVar)
	if !ok {
		return nil
	}
	os.Unsetenv(delegatedVar)
	if own := buildVersion(); from != own {
		exe, _ := os.Executable()
		return fmt.Errorf("%w: %s (%s) was started by a lockrun from another release (%s=%s); install all of the programs from the same one", backend.ErrConfig, filepath.Base(exe), own, delegatedVar, from)
	}
	return nil
}

// delegate replaces this process with prog, from this program's own
// directory (where `make build`, the archives and the packages install
// every program), with the same arguments and environment: prog opens the
// backend and does the rest. What lockrun has said so far is dropped, not
// flushed: prog says it again. It returns only when it cannot.
func (st *state) delegate(prog string) error { return execProgram(prog, st.args) }

// execProgram replaces this process with prog, from this program's own
// directory, given args and this environment marked with delegatedVar.
// It returns only when it cannot: prog is missing, not a program, or this
// very program (a misnamed copy, which would start itself again).
func execProgram(prog string, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%w: finding %s: %w", backend.ErrConfig, prog, err)
	}
	path := filepath.Join(filepath.Dir(exe), prog)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s, which has this backend's client, is not beside %s: install all of the release's programs together (`go install github.com/lockrun/lockrun/cmd/...`)", backend.ErrConfig, prog, exe)
	case err != nil:
		return fmt.Errorf("%w: %w", backend.ErrConfig, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a program (not a regular file)", backend.ErrConfig, path)
	}
	if self, err := os.Stat(exe); err == nil && os.SameFile(fi, self) {
		return fmt.Errorf("%w: %s has no client for this backend (is it a misnamed copy of another program?)", backend.ErrConfig, path)
	}
	if err := unix.Access(path, unix.X_OK); err != nil {
		return fmt.Errorf("%w: %s cannot be executed: %w", backend.ErrConfig, path, err)
	}
	err = syscall.Exec(path, args, append(os.Environ(), delegatedVar+"="+buildVersion()))
	return fmt.Errorf("%w: starting %s: %w", backend.ErrConfig, path, err)
}

// opensBackend are the commands that always open their --backend.
var opensBackend = map[string]bool{"run": true, "status": true, "list": true, "release": true, "init": true}

// dispatch starts, in this process's place, the program that has the
// client of the backend that args name, before any other work: a run on a
// server backend pays for this program's start-up only, not for its
// command line too. Its reading of the command line (the last --backend
// before "--", else LOCKRUN_BACKEND) is a fast guess, not the CLI's
// parse: a wrong guess costs one more exec, since the program started
// parses the command line again and, if it lacks the client the flags
// name, starts the one that has it (see openBackend).
func dispatch(args []string) {
	i := 1
	for i < len(args) && verboseArg(args[i]) {
		i++
	}
	if _, ok := os.LookupEnv(delegatedVar); ok || i >= len(args) || !opensBackend[args[i]] {
		return
	}
	raw, ok := backendArg(args[i+1:])
	if !ok {
		raw = os.Getenv("LOCKRUN_BACKEND")
	}
	if u, err := url.Parse(raw); err == nil && programs[u.Scheme] != "" {
		_ = execProgram(programs[u.Scheme], args) // on failure, openBackend says why
	}
}

// backendArg is the last --backend (or -b) among a command's flags, which
// end at "--".
func backendArg(args []string) (string, bool) {
	raw, found := "", false
	for i := 0; i < len(args) && args[i] != "--"; i++ {
		name, value, inline := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(args[i], "-"), "-"), "=")
		if !strings.HasPrefix(args[i], "-") || name != "b" && name != "backend" {
			continue
		}
		if !inline {
			if i+1 == len(args) {
				break
			}
			i++
			value = args[i]
		}
		raw, found = value, true
	}
	return raw, found
}

// verboseArg tells whether arg is the global flag -v (--verbose), the only
// one that may come before the command.
func verboseArg(arg string) bool {
	switch arg {
	case "-v", "--v", "-verbose", "--verbose":
		return true
	}
	return false
}
