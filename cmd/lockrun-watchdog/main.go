// The watchdog sleeps between a few messages a run; the Go runtime must
// not wake it every second to re-read the CPU quota (see cmd/lockrun).

//go:debug updatemaxprocs=0

// Command lockrun-watchdog is lockrun's watchdog: the process that kills
// the command by its deadline when lockrun cannot (frozen or SIGKILLed).
// lockrun starts it from its own directory, beside the command, with one
// end of a socket on its stdin; it is no command to run by hand. It links
// the watchdog's package and the standard library only (no CLI, no
// backend client), so that it starts in a fraction of lockrun's own
// start-up and holds a few MB while it guards. See package watchdog.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/lockrun/lockrun/internal/watchdog"
)

// Exit statuses, as lockrun's own table has them.
const (
	exitUsage    = 64
	exitInternal = 70
	exitConfig   = 78
)

func main() {
	err := watchdog.Main(os.Stdin, os.Args[1:])
	if err == nil {
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, err) // "watchdog: ..."
	switch {
	case errors.Is(err, watchdog.ErrUsage):
		os.Exit(exitUsage)
	case errors.Is(err, watchdog.ErrProtocol):
		os.Exit(exitConfig)
	}
	os.Exit(exitInternal)
}
