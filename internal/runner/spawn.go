package runner

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/procfs"
)

// errTooLate is why a command was not started: its term deadline had
// passed (lockrun was frozen or starved between the grant and the exec).
var errTooLate = fmt.Errorf("%w: the term deadline passed before the command could start", backend.ErrUnavailable)

// startProcess starts a process and returns its pid (procfs.Start); a
// test replaces it to play a kernel that refuses clone3.
var startProcess = procfs.Start

// spawn starts the command in its cgroup, or without one only if the
// kernel refuses to start processes into cgroups (no clone3, as under an
// old seccomp profile) and the term deadline has not passed; that fallback
// is recorded in cgWhy, which the run reports. Any other failure, such as
// a cgroup removed by a watchdog that fired while lockrun was frozen, is
// final: the command never runs outside the containment it was given.
func (p *process) spawn(sp spec, attr *os.ProcAttr) (int, error) {
	if p.cg != nil {
		sys := *attr.Sys
		sys.UseCgroupFD, sys.CgroupFD = true, p.cg.fd
		in := *attr
		in.Sys = &sys
		if err := p.startable(sp); err != nil {
			return 0, err
		}
		pid, err := startProcess(sp.path, sp.argv, &in)
		if err == nil || !cloneRefused(err) {
			return pid, err
		}
		p.dropCgroup()
		p.cgWhy = fmt.Errorf("the kernel refused to start it in a cgroup: %w", err)
	}
	if err := p.startable(sp); err != nil {
		return 0, err
	}
	return startProcess(sp.path, sp.argv, attr)
}

// startable is the last check before the exec: no command starts at or
// after its term deadline. The watchdog holds the same deadline until it
// is told the command runs, and kills lockrun if it passes first, so a
// freeze after this check cannot start the command late either.
func (p *process) startable(sp spec) error {
	if !p.clock.Now().Before(sp.termAt) {
		return errTooLate
	}
	freezeBeforeExec() // a test hook; nothing in normal builds
	return nil
}

// cloneRefused tells a kernel that cannot start a process into a cgroup
// (clone3 or CLONE_INTO_CGROUP unknown, or filtered) from every other
// failure to start.
func cloneRefused(err error) bool {
	return errors.Is(err, syscall.ENOSYS) || errors.Is(err, syscall.EOPNOTSUPP)
}
