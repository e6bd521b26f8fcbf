package runner

import (
	"errors"
	"fmt"
	"syscall"
)

// The runner's errors. Each run's error wraps one of these or a backend
// sentinel (backend.ErrHeld, ErrLost, ErrUnavailable, ...); the CLI maps
// them to exit statuses in its one table.
var (
	// ErrMaxRun: the command ran for its --max-run and was stopped.
	ErrMaxRun = errors.New("the command reached its maximum run time")
	// ErrUnguarded: the watchdog died while the command ran, so the command
	// was stopped rather than left to run without a guard.
	ErrUnguarded = errors.New("the watchdog died while the command ran")
	// ErrNotFound: the command does not exist ("command NAME not found").
	ErrNotFound = errors.New("not found")
	// ErrCannotExec: the command exists but exec refused it.
	ErrCannotExec = errors.New("cannot be executed")
)

// ExitError is a status to pass through: the command's own, or 128+N for a
// run interrupted by signal N before the command started, as if the
// command had died of it. Err explains a status of lockrun's own; it is
// nil when the status is the command's.
type ExitError struct {
	Code int
	Err  error
}

// Error explains the status: lockrun's own reason, or the child's status.
func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("command exited with status %d", e.Code)
	}
	return e.Err.Error()
}

// ExitCode is the process exit status this error stands for.
func (e *ExitError) ExitCode() int { return e.Code }

// Unwrap gives errors.Is and errors.As the reason, if any.
func (e *ExitError) Unwrap() error { return e.Err }

// statusCode turns a wait status into a shell-style exit code: the exit
// status, or 128+N for death by signal N.
func statusCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// signalStatus is the status of a run interrupted by sig before the
// command started, as if the command had died of it.
func signalStatus(sig syscall.Signal) int { return 128 + int(sig) }
