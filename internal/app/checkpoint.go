package app

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/runner"
)

func checkpointCommand(st *state) *cli.Command {
	sub := func(name, usage, text string, action cli.ActionFunc) *cli.Command {
		return &cli.Command{Name: name, Usage: usage, UsageText: text, OnUsageError: onUsageError, Flags: commonFlags("print errors only", adminVerbose), Action: action}
	}
	return &cli.Command{
		Name:  "checkpoint",
		Usage: "store or read the lock's progress record (up to 64 KiB), e.g. to resume a backfill",
		UsageText: "inside the command of 'lockrun run':  lockrun checkpoint set VALUE|-   lockrun checkpoint get\n" +
			"   operators:                           lockrun checkpoint get|clear [--backend URL] KEY\n\n" +
			"   The command asks its own lockrun (through " + runner.EnvControl + "), which stores the value in the\n" +
			"   lock's backend only while its token is still the holder's: a late checkpoint of a holder\n" +
			"   that lost the lock is refused with exit 76. 'get' prints the value as stored (nothing\n" +
			"   when there is none; escaped, on one line, to a terminal); '-' reads the value from stdin.\n" +
			"   A semaphore's run (--limit above 1) keeps no checkpoint: set and get exit 64 there.",
		OnUsageError: onUsageError,
		Action:       needSubcommand("set, get or clear"),
		Subcommands: []*cli.Command{
			sub("set", "store VALUE as the lock's checkpoint (inside the command)", "lockrun checkpoint set VALUE|-", st.checkpointSet),
			sub("get", "print the lock's checkpoint", "lockrun checkpoint get            (inside the command)\n   lockrun checkpoint get [--backend URL] KEY", st.checkpointGet),
			sub("clear", "remove a lock's checkpoint", "lockrun checkpoint clear [--backend URL] KEY", st.checkpointClear),
		},
	}
}

func fenceCommand(st *state) *cli.Command {
	return &cli.Command{
		Name:         "fence",
		Usage:        "check, from inside the command, that its token is still the lock holder's",
		OnUsageError: onUsageError,
		Action:       needSubcommand("check"),
		Subcommands: []*cli.Command{{
			Name:  "check",
			Usage: "exit 0 when this command's token is still the holder's (in a semaphore, one of its holders'), 76 when not",
			UsageText: "lockrun fence check\n\n" +
				"   A check-then-act: the lock can be lost just after the check. Only a check in the store\n" +
				"   you write to (lockrun_fence in PostgreSQL, FCALL lockrun_fence in Redis) closes that window.",
			OnUsageError: onUsageError,
			Flags:        commonFlags("print errors only", adminVerbose),
			Action:       st.fenceCheck,
		}},
	}
}

// needSubcommand refuses a command given without one of its subcommands.
func needSubcommand(which string) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.Args().Present() {
			return usagef("unknown subcommand %q: use %s", c.Args().First(), which)
		}
		_ = cli.ShowSubcommandHelp(c)
		return usagef("%s needs a subcommand: %s", c.Command.Name, which)
	}
}

func (st *state) checkpointSet(c *cli.Context) error {
	if c.Args().Len() != 1 {
		return usagef("checkpoint set takes one VALUE (or - for stdin), got %d arguments", c.Args().Len())
	}
	value := []byte(c.Args().First())
	if c.Args().First() == "-" {
		var err error
		if value, err = io.ReadAll(io.LimitReader(st.stdin, backend.MaxCheckpoint+1)); err != nil {
			return fmt.Errorf("reading the checkpoint from stdin: %w", err)
		}
	}
	if len(value) > backend.MaxCheckpoint {
		return usagef("checkpoint set: the value is longer than %d bytes", backend.MaxCheckpoint)
	}
	_, err := st.ask(c, runner.ControlRequest{Op: runner.OpCheckpointSet, Value: value})
	return err
}

func (st *state) checkpointGet(c *cli.Context) error {
	if c.Args().Present() {
		return st.operatorCheckpoint(c, false)
	}
	ans, err := st.ask(c, runner.ControlRequest{Op: runner.OpCheckpointGet})
	if err != nil || ans.Status == runner.StatusNone {
		return err
	}
	return st.printCheckpoint(ans.Value)
}

func (st *state) checkpointClear(c *cli.Context) error {
	if !c.Args().Present() {
		return usagef("checkpoint clear needs the KEY (and --backend): it is for operators")
	}
	return st.operatorCheckpoint(c, true)
}

func (st *state) fenceCheck(c *cli.Context) error {
	if c.Args().Present() {
		return usagef("fence check takes no arguments, got %q", c.Args().First())
	}
	_, err := st.ask(c, runner.ControlRequest{Op: runner.OpFenceCheck})
	return err
}
