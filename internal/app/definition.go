package app

import (
	"os"

	"github.com/urfave/cli/v2"
)

// Definition is lockrun's command line as urfave/cli describes it, for the
// generator of the man page and the shell completions (internal/gendocs).
// It is the same definition Main runs, bound to the process's standard
// files; the generator reads it and never runs it.
func Definition() *cli.App {
	return newApp(&state{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr})
}
