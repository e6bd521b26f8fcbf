package app

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Exit is the main of every lockrun program: it runs Main with clients on
// the process's arguments and standard files, and exits with its status.
func Exit(clients Clients) {
	// A log line written to a stdout or stderr whose reader has gone must
	// not kill lockrun, and with it (by the watchdog) the command. A
	// handler rather than SIG_IGN: the command still starts with SIGPIPE's
	// default action.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	os.Exit(Main(context.Background(), clients, os.Args, os.Stdin, os.Stdout, os.Stderr))
}
