package app

import "github.com/urfave/cli/v2"

// urfave/cli works out a flag's names with a regular expression at every
// call of Names (cli.FlagNames), and a run calls it some 450 times: each
// flag's action check looks every unset flag up among all the others. That
// was 0.2 ms and 100 KB of garbage of a 4 ms run. The flags below answer
// Names from a slice made once; everything else is the flag's own.
// Pointers, as urfave/cli's own flags are: it compares flags with ==.

type boolFlag struct {
	*cli.BoolFlag
	names []string
}

type stringFlag struct {
	*cli.StringFlag
	names []string
}

type genericFlag struct {
	*cli.GenericFlag
	names []string
}

func (f *boolFlag) Names() []string    { return f.names }
func (f *stringFlag) Names() []string  { return f.names }
func (f *genericFlag) Names() []string { return f.names }

// Unwrap is the flag as urfave/cli defines it, for a caller that tells
// flags apart by type (internal/gendocs).
func (f *boolFlag) Unwrap() cli.Flag    { return f.BoolFlag }
func (f *stringFlag) Unwrap() cli.Flag  { return f.StringFlag }
func (f *genericFlag) Unwrap() cli.Flag { return f.GenericFlag }

// withNames gives every flag of app and of its commands names made once.
func withNames(app *cli.App) *cli.App {
	app.Flags = named(app.Flags)
	for _, c := range app.Commands {
		nameCommand(c)
	}
	return app
}

func nameCommand(c *cli.Command) {
	c.Flags = named(c.Flags)
	for _, sub := range c.Subcommands {
		nameCommand(sub)
	}
}

func named(flags []cli.Flag) []cli.Flag {
	out := make([]cli.Flag, len(flags))
	for i, f := range flags {
		switch f := f.(type) {
		case *cli.BoolFlag:
			out[i] = &boolFlag{f, names(f.Name, f.Aliases)}
		case *cli.StringFlag:
			out[i] = &stringFlag{f, names(f.Name, f.Aliases)}
		case *cli.GenericFlag:
			out[i] = &genericFlag{f, names(f.Name, f.Aliases)}
		default:
			out[i] = f
		}
	}
	return out
}

// names is what cli.FlagNames makes of a name and aliases without commas
// or spaces, as all of lockrun's are (TestFlagNamesAreUrfaves).
func names(name string, aliases []string) []string {
	return append([]string{name}, aliases...)
}
