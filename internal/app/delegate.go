package app

import (
	"fmt"
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

// delegatedVar marks a program started by delegate or dispatch with the
// starting program's version: a program which lacks the client it was
// started for (a misnamed binary) says so rather than starting itself
// again, and one of another release (an upgrade half done) refuses, as
// lockrun-watchdog does. Main removes it from the environment before
// anything else: the command never sees it.
const delegatedVar = "LOCKRUN_DELEGATED"

// takeDelegation reads and removes delegatedVar; a program started by
// one of another release is an error.
func (st *state) takeDelegation() error {
	from, ok := os.LookupEnv(delegatedVar)
	if !ok {
		return nil
	}
	os.Unsetenv(delegatedVar)
	st.delegated = true
	if own := buildVersion(); from != own {
		exe, _ := os.Executable()
		return fmt.Errorf("%w: %s (%s) was started by a lockrun from another release (%s); install all of the programs from the same one", backend.ErrConfig, filepath.Base(exe), own, from)
	}
	return nil
}

// delegate replaces this process with prog, from this program's own
// directory (where `make build`, the archives and the packages install
// every program), with the same arguments and environment: prog opens the
// backend and does the rest. It returns only when it cannot.
func (st *state) delegate(prog string) error {
	if st.delegated {
		return fmt.Errorf("%w: this program was started to use its client, and has none (is it misnamed?)", backend.ErrConfig)
	}
	if st.logw != nil {
		st.logw.Flush(flushWait) // what was said so far is not lost with this process
	}
	return execProgram(prog, st.args)
}

// execProgram replaces this process with prog, from this program's own
// directory, given args and this environment marked with delegatedVar.
// It returns only when it cannot.
func execProgram(prog string, args []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%w: finding %s: %w", backend.ErrConfig, prog, err)
	}
	path := filepath.Join(filepath.Dir(exe), prog)
	if err := unix.Access(path, unix.X_OK); err != nil {
		return fmt.Errorf("%w: %s, which has this backend's client, is not beside %s (%w): install all of the release's programs together, or `go install github.com/lockrun/lockrun/cmd/...@latest`", backend.ErrConfig, prog, exe, err)
	}
	err = syscall.Exec(path, args, append(os.Environ(), delegatedVar+"="+buildVersion()))
	return fmt.Errorf("%w: starting %s: %w", backend.ErrConfig, path, err)
}

// opensBackend are the commands that always open their --backend.
var opensBackend = map[string]bool{"run": true, "status": true, "list": true, "release": true, "init": true}

// dispatch starts, in this process's place, the program that has the
// client of the backend that args name, before any other work: a run on a
// server backend pays for this program's start-up only, not for its
// command line too. It reads the command line as the CLI will (the
// --backend flag before "--", else LOCKRUN_BACKEND) and does nothing
// when unsure: openBackend, given the parsed flags, starts the program
// then.
func dispatch(args []string) {
	if _, ok := os.LookupEnv(delegatedVar); ok || len(args) < 2 || !opensBackend[args[1]] {
		return
	}
	raw, ok := backendArg(args[2:])
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
