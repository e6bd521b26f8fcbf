package watchdog

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Find is the watchdog of the running lockrun: ProgramName in the
// directory of its executable, as `make build`, the release archives and
// the packages install it. Where there is none (a `go install` of
// ./cmd/lockrun alone, a binary copied on its own) it is Self, lockrun
// re-executed, which guards the command as well but starts slower; why
// then says why, for the caller to log.
func Find() (p Program, why error) {
	exe, err := os.Executable()
	if err != nil {
		return Self, fmt.Errorf("finding %s: %w", ProgramName, err)
	}
	return Beside(exe)
}

// Beside is ProgramName in the directory of exe, if it is there and this
// process may execute it; otherwise Self, and why not.
func Beside(exe string) (p Program, why error) {
	path := filepath.Join(filepath.Dir(exe), ProgramName)
	fi, err := os.Stat(path)
	if err != nil {
		return Self, err
	}
	if !fi.Mode().IsRegular() {
		return Self, fmt.Errorf("%s is not a regular file", path)
	}
	if err := unix.Access(path, unix.X_OK); err != nil {
		return Self, fmt.Errorf("%s: %w", path, err)
	}
	return Program{Path: path}, nil
}
