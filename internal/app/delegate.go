package app

import (
	"fmt"
	"os"
	"path/filepath"
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

// delegatedVar marks a program started by delegate, so that a program
// which lacks the client it was started for (a misnamed binary) says so
// rather than starting itself again. Main removes it from the environment
// before anything else: the command never sees it.
const delegatedVar = "LOCKRUN_DELEGATED"

// delegate replaces this process with prog, from this program's own
// directory (where `make build`, the archives and the packages install
// every program), with the same arguments and environment: prog opens the
// backend and does the rest. It returns only when it cannot.
func (st *state) delegate(prog string) error {
	if st.delegated {
		return fmt.Errorf("%w: this program was started to use its client, and has none (is it misnamed?)", backend.ErrConfig)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%w: finding %s: %w", backend.ErrConfig, prog, err)
	}
	path := filepath.Join(filepath.Dir(exe), prog)
	if err := unix.Access(path, unix.X_OK); err != nil {
		return fmt.Errorf("%w: %s, which has this backend's client, is not beside %s (%w): install all of the release's programs together, or `go install github.com/lockrun/lockrun/cmd/...@latest`", backend.ErrConfig, prog, exe, err)
	}
	if st.logw != nil {
		st.logw.Flush(flushWait) // what was said so far is not lost with this process
	}
	err = syscall.Exec(path, st.args, append(os.Environ(), delegatedVar+"=1"))
	return fmt.Errorf("%w: starting %s: %w", backend.ErrConfig, path, err)
}
