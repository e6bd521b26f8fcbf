package runner

import (
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// terminal is the controlling terminal lockrun lends to an interactive
// command, and lockrun's own process group to give it back to.
type terminal struct {
	fd   int
	pgrp int
}

// foreground returns the terminal on f when f is one and lockrun's process
// group is in its foreground; otherwise nil (cron, CI, pipes, `&`).
func foreground(f *os.File) *terminal {
	if f == nil {
		return nil
	}
	fd := int(f.Fd())
	fg, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || fg != syscall.Getpgrp() {
		return nil
	}
	return &terminal{fd: fd, pgrp: fg}
}

// reclaim puts lockrun's group back in the foreground once the command has
// exited. A background group that does so gets SIGTTOU, as shells do, so it
// is ignored for the call.
func (t *terminal) reclaim() {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, t.pgrp)
}
