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

// startError maps a failure to start name to 127 when it does not exist and
// 126 when exec refused it, as shells do; a failure of the system (out of
// processes or memory, or lockrun's own set-up) is 70, with its cause.
func startError(name string, err error) error {
	var pe *fs.PathError
	var ee *exec.Error
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return &ExitError{Code: ExitNotFound, Err: fmt.Errorf("command %q not found", name)}
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.ENOMEM):
		return &ExitError{Code: ExitSoftware, Err: fmt.Errorf("starting command %q: %w", name, unwrapPath(err))}
	case errors.As(err, &pe), errors.As(err, &ee):
		return &ExitError{Code: ExitCannotExec, Err: fmt.Errorf("command %q cannot be executed: %w", name, unwrapPath(err))}
	}
	return &ExitError{Code: ExitSoftware, Err: fmt.Errorf("starting command %q: %w", name, err)}
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
