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

// Exit codes for refusals that retrying will not cure (sysexits.h).
const (
	ExitNoPerm = 77 // the backend refused who we are or what we asked (EX_NOPERM)
	ExitConfig = 78 // the backend is not set up as the URL says (EX_CONFIG)
)

// answer is an exit status that is an answer rather than an error:
// status's "free", release's "nothing released". report prints nothing
// for it; the command has already said what it found.
type answer int

func (a answer) Error() string { return fmt.Sprintf("exit status %d", int(a)) }
func (a answer) ExitCode() int { return int(a) }

// Answers of status and release, documented in their help.
const (
	answerFree        answer = 1 // status: the lock is free; release: it was free
	answerNotReleased answer = 2 // release: declined, or the lock changed hands
)

// exitCode maps an error to lockrun's documented exit status.
func exitCode(err error) int {
	var coder interface{ ExitCode() int }
	hasCode := errors.As(err, &coder)
	switch {
	case err == nil:
		return 0
	case hasCode && coder.ExitCode() != runner.ExitSoftware:
		return coder.ExitCode()
	// A status of 70 only says that the runner did not know the error: a
	// refusal under it is still 77 or 78.
	case errors.Is(err, backend.ErrPermission):
		return ExitNoPerm
	case errors.Is(err, backend.ErrConfig):
		return ExitConfig
	case hasCode:
		return coder.ExitCode()
	case errors.Is(err, backend.ErrInvalidURL), errors.Is(err, backend.ErrInvalidKey):
		return runner.ExitUsage
	case errors.Is(err, backend.ErrPermission):
		return 77 // EX_NOPERM: a refused credential, lock file or lock directory
	case errors.Is(err, backend.ErrUnavailable):
		return runner.ExitUnavailable
	case errors.Is(err, backend.ErrHeld):
		return runner.ExitBusy
	}
	return runner.ExitSoftware
}
