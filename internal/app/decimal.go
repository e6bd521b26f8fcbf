package app

import (
	"errors"
	"strconv"

	"github.com/urfave/cli/v2"
)

// decimal is the value of a count flag, read in base 10 only. A plain
// IntFlag reads Go's base prefixes on the command line (010 is 8, 0x10
// is 16, 1_0 is 10) and not from the environment: a zero-padded limit
// from a template would then mean another count on one host than on the
// rest of its fleet.
type decimal struct{ n int }

// Set parses v in base 10.
func (d *decimal) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 0)
	if err != nil {
		return errors.New("want a decimal number")
	}
	d.n = int(n)
	return nil
}

// String is the value in decimal, as --help shows a default.
func (d *decimal) String() string { return strconv.Itoa(d.n) }

// decimalFlag is a flag that takes a decimal number (see decimal), also
// from LOCKRUN_<variable>.
func decimalFlag(name, variable, usage string, value int) *cli.GenericFlag {
	return &cli.GenericFlag{Name: name, EnvVars: env(variable), Usage: usage, Value: &decimal{value}}
}

// count is the value of a decimalFlag.
func count(c *cli.Context, name string) int {
	if d, ok := c.Generic(name).(*decimal); ok {
		return d.n
	}
	return 0
}
