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

// startError says why name could not start: ErrNotFound when it does not
// exist and ErrCannotExec when exec refused it (127 and 126, as shells
// say); a failure of the system (out of processes or memory, or lockrun's
// own set-up) wraps neither.
func startError(name string, err error) error {
	var pe *fs.PathError
	var ee *exec.Error
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("command %q %w", name, ErrNotFound)
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.ENOMEM):
		return fmt.Errorf("starting command %q: %w", name, unwrapPath(err))
	case errors.As(err, &pe), errors.As(err, &ee):
		return fmt.Errorf("command %q %w: %w", name, ErrCannotExec, unwrapPath(err))
	}
	return fmt.Errorf("starting command %q: %w", name, err)
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
