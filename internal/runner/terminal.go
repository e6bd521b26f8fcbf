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

// reclaim puts lockrun's group back in the foreground once the command
// (group pgid) has exited or stopped, if the command's group still has it:
// after `bg` the shell has the terminal, and must keep it.
func (t *terminal) reclaim(pgid int) {
	if fg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP); err == nil && fg == pgid {
		t.give(t.pgrp)
	}
}

// give puts group pgrp in the terminal's foreground. A background group
// that does so gets SIGTTOU, as shells know, so it is ignored for the call.
func (t *terminal) give(pgrp int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	_ = unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, pgrp)
}

// suspend follows a command that stopped (Ctrl-Z) as a shell's job would:
// lockrun takes the terminal back and stops itself, so that the shell
// regains control; when continued (fg or bg) it continues the command, and
// lends it the terminal again if lockrun is in the foreground. While
// stopped lockrun renews nothing: a suspension longer than the lease ends
// in a loss, and the watchdog kills the command by the deadline.
func (t *terminal) suspend(pgid int) {
	t.reclaim(pgid)
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	<-cont
	if fg, err := unix.IoctlGetInt(t.fd, unix.TIOCGPGRP); err == nil && fg == t.pgrp {
		t.give(pgid)
	}
	_ = syscall.Kill(-pgid, syscall.SIGCONT)
}
