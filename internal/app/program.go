package app

import (
	"context"
	"os"

	"golang.org/x/sys/unix"
)

// Exit is the main of every lockrun program: it runs Main with clients on
// the process's arguments and standard files, and exits with its status.
func Exit(clients Clients) {
	os.Exit(Main(context.Background(), clients, os.Args, os.Stdin, ownDescriptor(os.Stdout), ownDescriptor(os.Stderr)))
}

// ownDescriptor is f under a descriptor of its own (a dup), or f if it
// cannot be duplicated (closed). A write that finds the reader of a
// stdout or stderr gone must not kill lockrun, and with it (by the
// watchdog) the command: through descriptor 1 or 2 the Go runtime turns
// EPIPE into death by SIGPIPE, through any other it returns the error. A
// dup rather than a SIGPIPE handler, which costs the runtime the start
// of a thread of its own and a round trip to it (0.28 ms of every run on
// a 2-core VM), and would do no more: the command must start with SIGPIPE at its default action anyway.
func ownDescriptor(f *os.File) *os.File {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return f
	}
	return os.NewFile(uintptr(fd), f.Name())
}
