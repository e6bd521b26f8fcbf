package app

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"
)

// seconds is the value of a duration flag: a Go duration ("1m30s") or, as
// flock(1), timeout(1) and sleep(1) users type it, a bare number of
// seconds ("10", "0.5").
type seconds struct{ d time.Duration }

// Set parses v; a bare number is seconds.
func (s *seconds) Set(v string) error {
	d, err := parseSeconds(v)
	if err != nil {
		return err
	}
	s.d = d
	return nil
}

// String is the value as a Go duration, as --help shows a default.
func (s *seconds) String() string { return s.d.String() }

// parseSeconds reads a Go duration, or a bare number as seconds.
func parseSeconds(v string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > math.MaxInt64/float64(time.Second) {
			return 0, fmt.Errorf("%q is not a usable number of seconds", v)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q: want seconds (10) or a duration (1m30s)", v)
	}
	return d, nil
}

// durationFlag is a flag that takes seconds or a duration (see seconds),
// also from LOCKRUN_<variable>; a zero default without a text shows as
// "none".
func durationFlag(name, variable, usage string, value time.Duration, defaultText string) *cli.GenericFlag {
	if value == 0 && defaultText == "" {
		defaultText = "none"
	}
	return &cli.GenericFlag{
		Name:        name,
		EnvVars:     env(variable),
		Usage:       usage,
		Value:       &seconds{value},
		DefaultText: defaultText,
	}
}

// duration is the value of a durationFlag.
func duration(c *cli.Context, name string) time.Duration {
	if s, ok := c.Generic(name).(*seconds); ok {
		return s.d
	}
	return 0
}
