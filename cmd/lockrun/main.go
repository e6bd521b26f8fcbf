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
)

func main() {
	os.Exit(Main(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr))
}
