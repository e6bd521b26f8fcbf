package app

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/runner"
)

// ask sends req to the lockrun that runs this command and turns a refusal
// into its exit code: 76 when the token is no longer the holder's.
func (st *state) ask(c *cli.Context, req runner.ControlRequest) (runner.ControlAnswer, error) {
	if _, err := st.logFrom(c); err != nil {
		return runner.ControlAnswer{}, err
	}
	path := os.Getenv(runner.EnvControl)
	if path == "" && os.Getenv("LOCKRUN_FAIL_OPEN") == "1" {
		// No lock, no token: a fence check or a checkpoint must fail as
		// it does for a holder that lost its lock.
		return runner.ControlAnswer{}, refusal{"this command runs WITHOUT the lock (--fail-open): there is no token to check and no checkpoint to use", backend.ErrLost}
	}
	if path == "" {
		return runner.ControlAnswer{}, usagef("%s is not set: run this inside the command of 'lockrun run' (operators: lockrun checkpoint get|clear --backend URL KEY)", runner.EnvControl)
	}
	ans, err := runner.Ask(c.Context, path, req)
	if err != nil {
		return ans, fmt.Errorf("%w: asking the lockrun that runs this command: %w", backend.ErrUnavailable, err)
	}
	switch ans.Status {
	case runner.StatusOK, runner.StatusNone:
		return ans, nil
	case runner.StatusLost:
		return ans, refusal{ans.Message, backend.ErrLost}
	}
	return ans, controlError(ans)
}

// controlError is a refusal with the sentinel its kind stands for, so that
// it exits as the same error would from the backend itself.
func controlError(ans runner.ControlAnswer) error {
	switch ans.Kind {
	case runner.KindUsage:
		return usagef("%s", ans.Message)
	case runner.KindPermission:
		return refusal{ans.Message, backend.ErrPermission}
	case runner.KindConfig:
		return refusal{ans.Message, backend.ErrConfig}
	case runner.KindUnavailable:
		return refusal{ans.Message, backend.ErrUnavailable}
	}
	return errors.New(ans.Message)
}

// refusal is the holding lockrun's message, which already says what went
// wrong, carrying the sentinel that decides the exit status.
type refusal struct {
	msg      string
	sentinel error
}

func (r refusal) Error() string { return r.msg }
func (r refusal) Unwrap() error { return r.sentinel }

// operatorCheckpoint reads (or with clear, removes) KEY's checkpoint in
// the backend directly, whoever holds the lock.
func (st *state) operatorCheckpoint(c *cli.Context, clear bool) error {
	return st.withKey(c, func(b backend.Backend, key string) error {
		cp, ok := b.(backend.Checkpointer)
		if !ok {
			return usagef("this backend keeps no checkpoints")
		}
		if clear {
			return cp.ClearCheckpoint(c.Context, key)
		}
		v, found, err := cp.GetCheckpoint(c.Context, key)
		if err != nil {
			return err
		}
		if !found {
			if !st.quiet {
				fmt.Fprintf(st.stderr, "lockrun: %s: no checkpoint\n", key)
			}
			return nil
		}
		return st.printCheckpoint(v.Value)
	})
}

// printCheckpoint writes a checkpoint as stored to a pipe or file, and
// escaped to a terminal: another holder may have written anything.
func (st *state) printCheckpoint(value []byte) error {
	if _, err := unix.IoctlGetTermios(int(st.stdout.Fd()), unix.TCGETS); err == nil {
		_, err := fmt.Fprintln(st.stdout, backend.Escape(string(value)))
		return err
	}
	_, err := st.stdout.Write(value)
	return err
}
