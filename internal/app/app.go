// Package app is lockrun's command line: the urfave/cli definition, flags and
// their LOCKRUN_* variables, subcommands and the one exit-code table. The
// program in cmd/lockrun only calls Main and exits.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/logwriter"
	"github.com/lockrun/lockrun/internal/runner"
)

// Main runs lockrun with args and returns the status to exit with.
func Main(ctx context.Context, args []string, stdin, stdout, stderr *os.File) int {
	st := &state{stdin: stdin, stdout: stdout, stderr: stderr}
	err := newApp(st).RunContext(ctx, args)
	st.report(err)
	if st.logw != nil {
		st.logw.Flush(flushWait)
	}
	return exitCode(err)
}

// state is what the commands share: the standard files, and the logger
// once the flags have said how to log.
type state struct {
	stdin, stdout, stderr *os.File
	log                   *slog.Logger
	logw                  *logwriter.Writer // run's stderr for lockrun's own lines, which never blocks
	quiet, json           bool
}

func newApp(st *state) *cli.App {
	return &cli.App{
		Name:    "lockrun",
		Usage:   "run a command under a distributed lock",
		Version: buildVersion(),
		Description: "lockrun takes a lease on a named lock, runs the command, renews the lease while it runs,\n" +
			"hands it a fencing token in LOCKRUN_FENCING_TOKEN, and kills it before the lease can\n" +
			"expire if the lock is lost. See 'lockrun run --help'.",
		Commands:        []*cli.Command{runCommand(st), statusCommand(st), releaseCommand(st), initCommand(st), checkpointCommand(st), fenceCommand(st), watchdogCommand()},
		Reader:          st.stdin,
		Writer:          st.stdout,
		ErrWriter:       st.stderr,
		HideHelpCommand: true,
		OnUsageError:    onUsageError,
		ExitErrHandler:  func(*cli.Context, error) {}, // main owns the exit
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("unknown command %q: use run, status, release, init, checkpoint or fence (see lockrun --help)", c.Args().First())
			}
			_ = cli.ShowAppHelp(c)
			return usagef("no command given")
		},
	}
}

func onUsageError(_ *cli.Context, err error, _ bool) error {
	return usageError{err}
}

// report prints err in one line, unless it is the command's own status or
// a busy lock under --quiet.
func (st *state) report(err error) {
	var exit *runner.ExitError
	if err == nil || errors.As(err, &exit) && exit.Err == nil {
		return
	}
	if st.quiet && errors.Is(err, backend.ErrHeld) {
		return
	}
	if !st.json {
		var w io.Writer = st.stderr
		if st.logw != nil {
			w = st.logw
		}
		fmt.Fprintf(w, "lockrun: %v\n", err)
		return
	}
	st.log.Error(err.Error(), "exit_code", exitCode(err))
}

// logTo returns the command's logger, remembering it for report.
func (st *state) logTo(w io.Writer, format string, quiet, verbose bool) (*slog.Logger, error) {
	log, err := newLogger(w, format, quiet, verbose)
	if err != nil {
		return nil, err
	}
	st.log, st.quiet, st.json = log, quiet, format == "json"
	return log, nil
}
