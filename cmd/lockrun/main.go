// The Go runtime re-reads the CPU quota every second to adjust GOMAXPROCS.
// lockrun and its watchdog spend their lives asleep between renewals: they
// keep the GOMAXPROCS of their start and are not woken for nothing.

//go:debug updatemaxprocs=0

// Command lockrun runs a command under a distributed lock: one holder at a
// time, a fencing token in LOCKRUN_FENCING_TOKEN, and the command killed
// before its lease can expire if the lock is lost.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/lockrun/lockrun/internal/app"
)

func main() {
	// A log line written to a stdout or stderr whose reader has gone must
	// not kill lockrun, and with it (by the watchdog) the command. A
	// handler rather than SIG_IGN: the command still starts with SIGPIPE's
	// default action.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(app.Main(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr))
}
