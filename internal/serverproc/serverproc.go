// Package serverproc owns the process of a test server (redis-server,
// etcd, postgres): it starts it, waits until it serves, and freezes, thaws
// and kills it together with every process it started, so that a server
// that forks a process per session stops answering as a whole.
package serverproc

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/procfs"
)

// pollInterval is how often Ready probes a starting server.
const pollInterval = 10 * time.Millisecond

// Proc is one started server process. Its methods are safe for concurrent
// use; once the process has exited, signals are no longer sent.
type Proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait has returned
	err    error         // cmd.Wait's result, set before exited is closed
}

// Start starts cmd and reaps it in the background. The process gets
// SIGKILL if the test's own process dies first (Pdeathsig), so a crashed
// test leaves no server behind; cmd's other SysProcAttr settings are kept.
func Start(cmd *exec.Cmd) (*Proc, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// PID is the server's process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Ready calls probe until it returns nil, and returns nil then. It fails
// when the process exits first (with its exit status) or when timeout has
// passed (with probe's last error).
func (p *Proc) Ready(timeout time.Duration, probe func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := probe()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited: %v", p.err)
		case <-time.After(pollInterval):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v: %w", timeout, err)
		}
	}
}

// Signal sends sig to the server and to every process below it: SIGSTOP
// freezes the whole server (connections stay open, nothing answers, like
// a hung machine) until SIGCONT. The tree is read before the first
// signal, since a child whose parent dies is moved away from it at once.
func (p *Proc) Signal(sig syscall.Signal) error {
	select {
	case <-p.exited:
		return errors.New("the server is not running")
	default:
	}
	children := procfs.Descendants(p.PID())
	if err := p.cmd.Process.Signal(sig); err != nil {
		return err
	}
	for _, pid := range children {
		_ = syscall.Kill(pid, sig) // it may have exited meanwhile
	}
	return nil
}

// Stop asks the server to shut down by sending sig to its main process
// only (which shuts its children down in order), after thawing the whole
// tree, since a stopped process acts on no signal but SIGKILL. It waits up
// to grace for the server to exit, then kills it, and returns once the
// server has exited.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) {
	_ = p.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill sends SIGKILL to the server and every process below it (a crash:
// what the server had not written to disk is lost) and waits for the
// server to exit. Killing an exited server does nothing.
func (p *Proc) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	<-p.exited
}
