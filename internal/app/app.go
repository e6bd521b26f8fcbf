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
	"github.com/lockrun/lockrun/internal/buildinfo"
	"github.com/lockrun/lockrun/internal/logwriter"
	"github.com/lockrun/lockrun/internal/runner"
)

func init() {
	// -v is --verbose on every command; the version is -V, as in many
	// tools, so that `lockrun -v run ...` never prints it and runs nothing.
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Aliases: []string{"V"}, Usage: "print the version", DisableDefaultText: true}
}

// Main runs lockrun with args and returns the status to exit with. clients
// are the server backends' clients this program has; the file backend's
// is always there.
func Main(ctx context.Context, clients Clients, args []string, stdin, stdout, stderr *os.File) int {
	st := &state{stdin: stdin, stdout: stdout, stderr: stderr, closeLog: func() {}, clients: clients, args: args}
	err := st.takeDelegation()
	if err == nil {
		err = newApp(st).RunContext(ctx, args)
	}
	st.report(err)
	st.closeLog()
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
	logw                  *logwriter.Writer // stderr for lockrun's own lines, which never blocks
	quiet, json, sink     bool              // sink: lines go to --log, not stderr
	closeLog              func()            // flushes --log's sink
	clients               Clients           // the server backends this program opens itself
	args                  []string          // as given to Main, for delegate
	chain                 []string          // the programs started before this one's delegate (see delegate.Var)
}

func newApp(st *state) *cli.App {
	return withNames(&cli.App{
		Name:    "lockrun",
		Usage:   "run a command under a distributed lock",
		Version: buildinfo.Version(),
		Description: "lockrun takes a lease on a named lock, runs the command, renews the lease while it runs,\n" +
			"hands it a fencing token in LOCKRUN_FENCING_TOKEN, and kills it before the lease can\n" +
			"expire if the lock is lost. See 'lockrun run --help'.",
		Commands:        []*cli.Command{runCommand(st), statusCommand(st), listCommand(st), releaseCommand(st), initCommand(st), checkpointCommand(st), fenceCommand(st), watchdogCommand()},
		Flags:           []cli.Flag{verboseFlag("verbose, for every command: 'lockrun -v run' is 'lockrun run -v'")},
		Reader:          st.stdin,
		Writer:          st.stdout,
		ErrWriter:       st.stderr,
		HideHelpCommand: true,
		OnUsageError:    onUsageError,
		ExitErrHandler:  func(*cli.Context, error) {}, // main owns the exit
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usagef("unknown command %q: use run, status, list, release, init, checkpoint or fence (see lockrun --help)", c.Args().First())
			}
			_ = cli.ShowAppHelp(c)
			return usagef("no command given")
		},
	})
}

func onUsageError(_ *cli.Context, err error, _ bool) error {
	return usageError{err}
}

// report prints err in one line, unless it is the command's own status,
// an answer (see answer) or a busy lock under --quiet. In JSON, and in
// syslog, the holder of a busy lock has fields of its own.
func (st *state) report(err error) {
	var exit *runner.ExitError
	var a answer
	if err == nil || errors.As(err, &exit) && exit.Err == nil || errors.As(err, &a) {
		return
	}
	if st.quiet && errors.Is(err, backend.ErrHeld) {
		return
	}
	if st.log == nil || !st.json && !st.sink {
		var w io.Writer = st.stderr
		if st.logw != nil {
			w = st.logw
		}
		fmt.Fprintf(w, "lockrun: %v\n", err)
		return
	}
	attrs := []any{"exit_code", exitCode(err)}
	var held *backend.HeldError
	if errors.As(err, &held) && held.Status.Holder != "" {
		h := held.Status.Holder // JSON escapes it; a text line must
		if !st.json {
			h = backend.Escape(h)
		}
		attrs = append(attrs, "holder", h, "token", held.Status.Token.String())
	}
	st.log.Error(err.Error(), attrs...)
}

// logFrom returns the command's logger as its flags say (--log,
// --log-format, --quiet, --verbose), remembering it for report.
func (st *state) logFrom(c *cli.Context) (*slog.Logger, error) {
	quiet, verbose, format := c.Bool("quiet"), verbosity(c), c.String("log-format")
	if _, err := newLogger(io.Discard, format, quiet, verbose); err != nil {
		return nil, err // checked before a syslog connection is made
	}
	st.logw = newLogWriter(st.stderr, format)
	w, closeLog, err := openLog(c.String("log"), st.logw)
	if err != nil {
		return nil, err
	}
	log, _ := newLogger(w, format, quiet, verbose)
	st.log, st.quiet, st.json, st.closeLog = log, quiet, format == "json", closeLog
	st.sink = w != io.Writer(st.logw)
	return log, nil
}

// verbosity tells whether -v was given to the command or before it
// (`lockrun -v run ...`).
func verbosity(c *cli.Context) bool {
	for _, x := range c.Lineage() {
		if x.Bool("verbose") {
			return true
		}
	}
	return false
}

// What -v adds to a run, and to the other commands.
const (
	runVerbose   = "say more: the lock's life, how long it waited, how the command ended"
	adminVerbose = "log debug lines too"
)

func verboseFlag(usage string) cli.Flag {
	return &cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, EnvVars: env("VERBOSE"), Usage: usage}
}
