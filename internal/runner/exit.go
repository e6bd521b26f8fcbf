package runner

import (
	"fmt"
	"syscall"
)

// Exit codes of lockrun's own (the child's status is passed through).
const (
	ExitUsage       = 64  // bad flags, key or backend URL (EX_USAGE)
	ExitUnavailable = 69  // the backend cannot be reached (EX_UNAVAILABLE)
	ExitSoftware    = 70  // anything unexpected (EX_SOFTWARE)
	ExitBusy        = 75  // lock held by someone else (EX_TEMPFAIL); changeable
	ExitLost        = 76  // ownership lost while the command ran; it was killed
	ExitCannotExec  = 126 // the command exists but cannot be executed
	ExitNotFound    = 127 // the command was not found
)

// ExitError carries the status lockrun should exit with. Err explains a
// status of lockrun's own; it is nil when the status is the child's.
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
