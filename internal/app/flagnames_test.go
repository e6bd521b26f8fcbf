package app

import (
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestFlagNamesAreUrfaves: every flag of every command answers Names from
// the slice made once (none is left to urfave/cli's regular expression),
// and that slice is what urfave/cli itself would make of the flag.
func TestFlagNamesAreUrfaves(t *testing.T) {
	app := newApp(&state{})
	check := func(where string, flags []cli.Flag) {
		for _, f := range flags {
			u, ok := f.(interface{ Unwrap() cli.Flag })
			if !ok {
				t.Errorf("%s: flag %v (%T) works its names out at every call", where, f.Names(), f)
				continue
			}
			inner := u.Unwrap().(cli.DocGenerationFlag)
			name, aliases := flagSpelling(inner)
			if want := cli.FlagNames(name, aliases); !slices.Equal(f.Names(), want) {
				t.Errorf("%s: flag names %q, urfave/cli makes %q", where, f.Names(), want)
			}
		}
	}
	check("lockrun", app.Flags)
	var walk func(string, []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			check(prefix+c.Name, c.Flags)
			walk(prefix+c.Name+" ", c.Subcommands)
		}
	}
	walk("lockrun ", app.Commands)
}

// flagSpelling is the Name and Aliases fields of one of urfave/cli's flags.
func flagSpelling(f cli.DocGenerationFlag) (string, []string) {
	switch f := f.(type) {
	case *cli.BoolFlag:
		return f.Name, f.Aliases
	case *cli.StringFlag:
		return f.Name, f.Aliases
	case *cli.GenericFlag:
		return f.Name, f.Aliases
	}
	return "", nil
}

// TestRunParsesWithNamedFlags: aliases, environment variables and the
// actions' IsSet checks still see the flags once their names are made once.
func TestRunParsesWithNamedFlags(t *testing.T) {
	t.Setenv("LOCKRUN_TTL", "7")
	var got struct {
		quiet, wait, heartbeatSet, killGraceSet bool
		ttl                                     string
		backend                                 string
	}
	app := newApp(&state{})
	for _, c := range app.Commands {
		if c.Name == "run" {
			c.Action = func(c *cli.Context) error {
				got.quiet, got.wait = c.Bool("quiet"), c.Bool("wait")
				got.heartbeatSet, got.killGraceSet = c.IsSet("heartbeat"), c.IsSet("kill-grace")
				got.ttl, got.backend = duration(c, "ttl").String(), c.String("backend")
				return nil
			}
		}
	}
	if err := app.Run([]string{"lockrun", "run", "-q", "-w", "-b", "file:///x", "--heartbeat", "2", "k", "--", "true"}); err != nil {
		t.Fatal(err)
	}
	if !got.quiet || !got.wait || !got.heartbeatSet || got.killGraceSet || got.ttl != "7s" || got.backend != "file:///x" {
		t.Errorf("parsed %+v; want quiet, wait, --heartbeat set, --kill-grace not, ttl 7s from LOCKRUN_TTL, backend file:///x", got)
	}
}
