// Package delegate starts, in this process's place, the lockrun program
// that has a server backend's client. lockrun itself has the file
// backend's only: no run pays, at every start, for the package init and
// the memory of clients it does not use (in one binary they were half of
// a run's time on the file backend: see docs/performance.md).
//
// It links nothing with package initialisation of its own beyond the
// standard library's basics and buildinfo, so that lockrun can dispatch
// before its other packages initialise (see package dispatch).
package delegate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/lockrun/lockrun/internal/buildinfo"
)

// Programs names, for each server backend's URL scheme, the program that
// has its client.
var Programs = map[string]string{
	"redis": "lockrun-redis", "rediss": "lockrun-redis", "redlock": "lockrun-redis", "redlocks": "lockrun-redis",
	"etcd": "lockrun-etcd", "etcds": "lockrun-etcd",
	"postgres": "lockrun-postgres", "postgresql": "lockrun-postgres",
	"zk": "lockrun-zookeeper", "zks": "lockrun-zookeeper",
}

// Var marks a program started by Exec with the starting program's version
// and the programs started so far, "VERSION|PROG,PROG" (see ParseMark):
// one of another release (an upgrade half done) refuses, as
// lockrun-watchdog does, a started lockrun does not dispatch again, and
// no program is started twice in one chain (a wrapper installed in a
// program's place that starts lockrun again would loop). The started
// program removes it from its environment before anything else: the
// command never sees it.
const Var = "LOCKRUN_DELEGATED"

// mark is Var's value for a chain of programs started, prog last.
func mark(chain []string) string { return buildinfo.Version() + "|" + strings.Join(chain, ",") }

// ParseMark reads Var's value: the version of the release that set it, and
// the programs started in its chain so far.
func ParseMark(v string) (version string, chain []string) {
	i := strings.LastIndexByte(v, '|') // a version may hold '|' (a git tag may); a program's name does not
	if i < 0 || i == len(v)-1 {
		return v, nil
	}
	return v[:i], strings.Split(v[i+1:], ",")
}

// Exec replaces this process with prog, from this program's own directory
// (where `make build`, the archives and the packages install every
// program), given args and this environment marked with Var, chain being
// the programs started before this one. It returns only when it cannot:
// prog is missing, not a program, this very program (a misnamed copy,
// which would start itself again) or started once already in chain.
func Exec(prog string, args []string, chain []string) error {
	if slices.Contains(chain, prog) {
		return fmt.Errorf("%s started a program without its client (is %s a wrapper, or a misnamed copy of another program?)", prog, prog)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding %s: %w", prog, err)
	}
	path := exe[:strings.LastIndexByte(exe, '/')+1] + prog // os.Executable's path is absolute and clean
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s, which has this backend's client, is not beside %s: install all of the release's programs together (`go install github.com/lockrun/lockrun/cmd/...`)", prog, exe)
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a program (not a regular file)", path)
	}
	if self, err := os.Stat(exe); err == nil && os.SameFile(fi, self) {
		return fmt.Errorf("%s has no client for this backend (is it a misnamed copy of another program?)", path)
	}
	const xOK = 1 // access(2)'s X_OK
	if err := syscall.Access(path, xOK); err != nil {
		return fmt.Errorf("%s cannot be executed: %w", path, err)
	}
	err = syscall.Exec(path, args, append(os.Environ(), Var+"="+mark(append(chain, prog))))
	return fmt.Errorf("starting %s: %w", path, err)
}

// opensBackend are the commands that always open their --backend.
var opensBackend = map[string]bool{"run": true, "status": true, "list": true, "release": true, "init": true}

// Dispatch starts, in this process's place, the program that has the
// client of the backend that args (a command line, program name first)
// name, and returns when there is none to start or it could not: the
// caller's CLI then opens the backend, and says why it cannot. Its reading
// of the command line (the last --backend before "--", else
// LOCKRUN_BACKEND) is a fast guess, not the CLI's parse: a wrong guess
// costs one more exec, since the program started parses the command line
// again and, if it lacks the client the flags name, starts the one that
// has it.
func Dispatch(args []string) {
	i := 1
	for i < len(args) && verboseArg(args[i]) {
		i++
	}
	if _, ok := os.LookupEnv(Var); ok || i >= len(args) || !opensBackend[args[i]] {
		return
	}
	raw, ok := backendArg(args[i+1:])
	if !ok {
		raw = os.Getenv("LOCKRUN_BACKEND")
	}
	if prog := Programs[scheme(raw)]; prog != "" {
		_ = Exec(prog, args, nil) // on failure, the CLI says why
	}
}

// scheme is raw's URL scheme, lower-cased, or "" if it has none (RFC 3986:
// an ASCII letter, then letters, digits, '+', '-' and '.', then ':'): the
// scheme net/url would read, though the rest of raw is not checked (the
// program started parses raw in full). It spares Dispatch net/url, and the
// packages initialised before it.
func scheme(raw string) string {
	s, _, ok := strings.Cut(raw, ":")
	if !ok || s == "" {
		return ""
	}
	for i := 0; i < len(s); i++ { // bytes: no Unicode case folding (U+212A is no 'k')
		c := s[i] | 0x20 // ASCII lower case; digits and "+-." do not change
		letter := 'a' <= c && c <= 'z'
		if !letter && (i == 0 || !('0' <= s[i] && s[i] <= '9' || s[i] == '+' || s[i] == '-' || s[i] == '.')) {
			return ""
		}
	}
	return strings.ToLower(s)
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
