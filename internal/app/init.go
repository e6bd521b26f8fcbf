package app

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"
)

// initer is a backend that can prepare its store ahead of time, e.g.
// create its tables, for teams that forbid DDL at run time.
type initer interface {
	Init(ctx context.Context) error
}

func initCommand(st *state) *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "prepare the backend's store (PostgreSQL: the lease table and lockrun_fence; Redis: the fence functions); safe to repeat",
		UsageText: "lockrun init [--backend URL]\n\n" +
			"   Backends that need nothing prepared say so and exit 0.",
		OnUsageError: onUsageError,
		Flags:        commonFlags("print errors only", adminVerbose),
		Action:       st.init,
	}
}

func (st *state) init(c *cli.Context) error {
	if _, err := st.logFrom(c); err != nil {
		return err
	}
	if c.Args().Present() {
		return usagef("init takes no arguments, got %q", c.Args().First())
	}
	raw := c.String("backend")
	b, err := st.openBackend(c.Context, raw)
	if err != nil {
		return err
	}
	defer b.Close()
	i, ok := b.(initer)
	if !ok {
		if !st.quiet {
			fmt.Fprintf(st.stdout, "%s: nothing to prepare\n", describeBackend(raw, b))
		}
		return nil
	}
	if err := i.Init(c.Context); err != nil {
		return err
	}
	if !st.quiet {
		fmt.Fprintf(st.stdout, "%s: ready\n", describeBackend(raw, b))
	}
	return nil
}
