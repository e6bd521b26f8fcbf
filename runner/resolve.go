package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"syscall"
)

// Resolve finds the command as a shell would, before any lock is taken, so
// that a typo costs no lock. A name found only in a relative PATH entry is
// accepted, as shells accept it.
func Resolve(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil && !errors.Is(err, exec.ErrDot) {
		return "", startError(name, err)
	}
	return path, nil
}

// startError maps a failure to execute name to 126 or 127, as shells do.
func startError(name string, err error) error {
	code := ExitNotFound
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EISDIR) {
		code = ExitCannotExec
	}
	if code == ExitNotFound {
		return &ExitError{Code: code, Err: fmt.Errorf("command %q not found", name)}
	}
	return &ExitError{Code: code, Err: fmt.Errorf("command %q cannot be executed: %w", name, unwrapPath(err))}
}

// unwrapPath drops the path wrapper around a syscall error, which only
// repeats the name.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
