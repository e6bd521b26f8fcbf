package app

import (
	"errors"
	"fmt"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/runner"
)

// lockrun's own exit statuses; otherwise it exits with the command's
// status (128+N if signal N killed it). This file is the one place that
// maps errors to them. One more status is not lockrun's choice: 137, when
// its watchdog SIGKILLs a lockrun frozen past the lease's deadline before
// the command started (docs/safety.md).
const (
	ExitUsage       = 64  // bad flags, key or backend URL (EX_USAGE)
	ExitUnavailable = 69  // the backend cannot be reached, may work later (EX_UNAVAILABLE)
	ExitSoftware    = 70  // anything unexpected (EX_SOFTWARE)
	ExitBusy        = 75  // lock held by someone else (EX_TEMPFAIL); --conflict-exit-code changes it
	ExitLost        = 76  // ownership lost, or the command's watchdog died, while it ran: it was stopped
	ExitNoPerm      = 77  // the backend refused who we are or what we asked (EX_NOPERM)
	ExitConfig      = 78  // the backend is not set up for lockrun as configured (EX_CONFIG)
	ExitMaxRun      = 124 // the command ran for --max-run and was stopped, as timeout(1) exits
	ExitCannotExec  = 126 // the command exists but cannot be executed
	ExitNotFound    = 127 // the command was not found
)

// usageError is a mistake in the command line or the environment; lockrun
// exits 64 with its one-line message.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }
func (e usageError) ExitCode() int { return ExitUsage }
func usagef(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

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

// busyError is a busy lock under --conflict-exit-code.
type busyError struct {
	err  error
	code int
}

func (e busyError) Error() string { return e.err.Error() }
func (e busyError) Unwrap() error { return e.err }
func (e busyError) ExitCode() int { return e.code }

// withBusyCode makes a busy lock exit with code instead of ExitBusy.
func withBusyCode(err error, code int) error {
	if errors.Is(err, backend.ErrHeld) {
		return busyError{err, code}
	}
	return err
}

// exitCode maps an error to lockrun's documented exit status. Order
// matters where an error wraps two sentinels: the command's own status
// first, a stopped command before the backend's state.
func exitCode(err error) int {
	var coder interface{ ExitCode() int }
	switch {
	case err == nil:
		return 0
	case errors.As(err, &coder): // the command's status, a usage error, --conflict-exit-code
		return coder.ExitCode()
	case errors.Is(err, backend.ErrLost), errors.Is(err, runner.ErrUnguarded):
		return ExitLost
	case errors.Is(err, runner.ErrMaxRun):
		return ExitMaxRun
	case errors.Is(err, runner.ErrNotFound):
		return ExitNotFound
	case errors.Is(err, runner.ErrCannotExec):
		return ExitCannotExec
	case errors.Is(err, backend.ErrInvalidURL), errors.Is(err, backend.ErrInvalidKey):
		return ExitUsage
	case errors.Is(err, backend.ErrPermission):
		return ExitNoPerm
	case errors.Is(err, backend.ErrConfig):
		return ExitConfig
	case errors.Is(err, backend.ErrHeld):
		return ExitBusy
	case errors.Is(err, backend.ErrUnavailable):
		return ExitUnavailable
	}
	return ExitSoftware
}
