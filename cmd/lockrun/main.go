// The Go runtime re-reads the CPU quota every second to adjust GOMAXPROCS.
// lockrun and its watchdog spend their lives asleep between renewals: they
// keep the GOMAXPROCS of their start and are not woken for nothing.

//go:debug updatemaxprocs=0

// Command lockrun runs a command under a distributed lock: one holder at a
// time, a fencing token in LOCKRUN_FENCING_TOKEN, and the command killed
// before its lease can expire if the lock is lost.
//
// It has the embedded file backend's client only. A server backend's URL
// makes it start, in its place, the program beside it that has that
// backend's client (lockrun-redis, lockrun-etcd, lockrun-postgres,
// lockrun-zookeeper), which is lockrun with that client added.
package main

import (
	"github.com/lockrun/lockrun/internal/app"
	_ "github.com/lockrun/lockrun/internal/dispatch" // before app's packages initialise
)

func main() { app.Exit(nil) }
