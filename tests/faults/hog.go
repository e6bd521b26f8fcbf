package faults

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// startHog starts a busy loop on every core, as the other jobs of a cron
// host are, for at most within; stop ends them and waits for them.
func startHog(child string, within time.Duration) (stop func()) {
	var hogs []*exec.Cmd
	for range runtime.NumCPU() {
		cmd := exec.Command(child)
		cmd.Env = append(os.Environ(), envMode+"=hog", envHold+"="+within.String())
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // none outlives a crashed test
		if cmd.Start() == nil {
			hogs = append(hogs, cmd)
		}
	}
	return func() {
		for _, h := range hogs {
			_ = h.Process.Kill()
			_ = h.Wait()
		}
	}
}
