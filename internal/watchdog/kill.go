package watchdog

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/procfs"
	"golang.org/x/sys/unix"
)

// killTree kills the command's process group pgid, its cgroup and every
// other descendant of lockrun, signals first, on the watchdog's real-time
// thread, and the /proc walk after, at normal priority.
// pgid is 0 when lockrun was frozen or killed before it could say which
// group is the command's (the command may run by then): the cgroup and
// the walk of lockrun's descendants still find it.
func killTree(pgid, lockrun int, cgroupDir string) {
	if pgid != 0 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		hastenDeath(pgid) // a killed process still needs a core to exit
		defer waitGroupGone(pgid)
	}
	if cgroupDir != "" {
		killCgroup(cgroupDir)
		defer removeCgroup(cgroupDir)
	}
	settle() // the signals are sent: what follows is no race
	self := os.Getpid()
	skip := func(pid int) bool { return pid == self }
	for i := 0; i < 100 && procfs.SignalDescendants(lockrun, syscall.SIGKILL, skip) > 0; i++ {
		time.Sleep(time.Millisecond) // let the killed become zombies
	}
}

// waitGroupGone waits, a second at most, until no process of group pgid
// is left: the watchdog's exit may free the lock (it holds the lock's
// files), so it must not exit while the killed are still dying.
func waitGroupGone(pgid int) {
	for i := 0; i < 1000 && procfs.GroupAlive(pgid); i++ {
		time.Sleep(time.Millisecond)
	}
}

// killCgroup kills everything in the cgroup dir at once (cgroup.kill,
// Linux 5.14); where that fails, it signals each process the cgroup lists.
func killCgroup(dir string) {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err == nil {
		return
	}
	for _, pid := range procfs.CgroupProcs(dir) {
		_ = syscall.Kill(pid, syscall.SIGKILL) // only kernels before 5.14 come here; a pid reused since the read is the residual risk
	}
}

// removeCgroup deletes the cgroup once empty, waiting a little for the
// killed to finish dying.
func removeCgroup(dir string) {
	for i := 0; i < 100; i++ {
		if err := unix.Rmdir(dir); err == nil || errors.Is(err, unix.ENOENT) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
