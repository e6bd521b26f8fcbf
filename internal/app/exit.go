package app

import (
	"errors"
	"fmt"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/runner"
)

// usageError is a mistake in the command line or the environment; lockrun
// exits 64 with its one-line message.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }
func (e usageError) ExitCode() int { return runner.ExitUsage }
func usagef(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

// exitCode maps an error to lockrun's documented exit status.
func exitCode(err error) int {
	var coder interface{ ExitCode() int }
	switch {
	case err == nil:
		return 0
	case errors.As(err, &coder):
		return coder.ExitCode()
	case errors.Is(err, backend.ErrInvalidURL), errors.Is(err, backend.ErrInvalidKey):
		return runner.ExitUsage
	case errors.Is(err, backend.ErrPermission):
		return 77 // EX_NOPERM: a refused credential, lock file or lock directory
	case errors.Is(err, backend.ErrConfig):
		return 78 // EX_CONFIG: reachable, but not set up for lockrun as configured
	case errors.Is(err, backend.ErrUnavailable):
		return runner.ExitUnavailable
	case errors.Is(err, backend.ErrHeld):
		return runner.ExitBusy
	}
	return runner.ExitSoftware
}
