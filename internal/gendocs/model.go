package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// program is what the generators need of the command line: the visible
// commands and their flags, in their definition's order.
type program struct {
	Name, Usage, Description string
	Commands                 []command
}

type command struct {
	Name, Usage  string
	UsageText    string // the synopsis line, "lockrun run [flags] KEY -- ..."
	Notes        string // what follows the synopsis in UsageText
	Description  string
	Flags        []option
	TakesCommand bool // its arguments end in "-- COMMAND [ARG...]"
}

// option is one flag: its long name first, then its aliases.
type option struct {
	Names   []string
	Usage   string
	Env     []string
	Default string // "" when the default is nothing worth saying
	Value   bool   // takes a value
	Kind    string // "duration", "int", "string", or "" for a switch
	// Placeholder names the value as the usage's `backquoted` word does
	// (urfave/cli's convention); "" to name it by Kind.
	Placeholder string
}

// describe reads def into a program, leaving out hidden commands.
func describe(def *cli.App) program {
	p := program{Name: def.Name, Usage: def.Usage, Description: def.Description}
	for _, c := range def.Commands {
		if c.Hidden {
			continue
		}
		synopsis, notes, _ := strings.Cut(c.UsageText, "\n")
		cmd := command{
			Name: c.Name, Usage: c.Usage, UsageText: synopsis, Notes: dedent(notes),
			Description: c.Description, TakesCommand: strings.Contains(synopsis, "-- COMMAND"),
		}
		for _, f := range c.Flags {
			cmd.Flags = append(cmd.Flags, describeFlag(f))
		}
		p.Commands = append(p.Commands, cmd)
	}
	return p
}

func describeFlag(f cli.Flag) option {
	o := option{Names: f.Names()}
	d, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return o
	}
	o.Placeholder, o.Usage = unquote(d.GetUsage())
	o.Env, o.Value = d.GetEnvVars(), d.TakesValue()
	if u, ok := f.(interface{ Unwrap() cli.Flag }); ok {
		f = u.Unwrap() // a flag with its names made once (package app)
	}
	switch f.(type) {
	case *cli.DurationFlag, *cli.GenericFlag: // lockrun's generic flags are durations that take bare seconds
		o.Kind = "duration"
	case *cli.IntFlag:
		o.Kind = "int"
	case *cli.StringFlag:
		o.Kind = "string"
	}
	switch def := d.GetDefaultText(); def {
	case "", "0", "0s", "false":
	default:
		o.Default = def
	}
	return o
}

// unquote takes the first `backquoted` word out of usage, as urfave/cli's
// help does to name a flag's value: the name, and usage without quotes.
func unquote(usage string) (name, text string) {
	before, rest, ok := strings.Cut(usage, "`")
	if !ok {
		return "", usage
	}
	name, after, ok := strings.Cut(rest, "`")
	if !ok {
		return "", usage
	}
	return name, before + name + after
}

// dedent drops the blank lines around text and the indentation urfave/cli's
// help wants.
func dedent(text string) string {
	lines := strings.Split(strings.Trim(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "   ")
	}
	return strings.Join(lines, "\n")
}

// flagNames are every name of every flag of every command, with dashes.
func (o option) spellings() []string {
	var s []string
	for _, n := range o.Names {
		s = append(s, dashes(n))
	}
	return s
}

func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}
