package watchdog

import (
	"errors"
	"os"
	"syscall"

	"github.com/lockrun/lockrun/internal/procfs"
	"golang.org/x/sys/unix"
)

// Without a cgroup, what the command setsid'd away is re-parented to init
// when lockrun dies, and a walk of lockrun's descendants no longer finds
// it. So the watchdog keeps its own view of lockrun's tree, refreshed on
// each deadline message (one per heartbeat) from the children lists
// alone, and at lockrun's death kills what it saw, and every process of
// its user whose environment carries this run's LOCKRUN_RUN_ID.

// envRunID names the watchdog's environment variable holding the run id;
// envProtocol the one holding the protocol lockrun speaks.
const (
	envRunID    = "LOCKRUN_WATCHDOG_RUN_ID"
	envProtocol = "LOCKRUN_WATCHDOG_PROTOCOL"
)

// tree is lockrun's descendants as the last refresh saw them.
type tree map[procfs.Identity]bool

// refresh walks the children lists from lockrun down (not this watchdog).
// A child whose parent is not the one it was listed under by the time its
// stat is read is skipped: the pid was reused in between.
func refresh(lockrun int) tree {
	self, seen := os.Getpid(), tree{}
	queue := []int{lockrun}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		kids, _ := procfs.Children(parent)
		for _, pid := range kids {
			if pid == self {
				continue
			}
			if id, ppid, ok := procfs.Identify(pid); ok && ppid == parent {
				seen[id] = true
				queue = append(queue, pid)
			}
		}
	}
	return seen
}

// pinned is a process held by a pidfd, checked to be the one identified.
type pinned struct {
	id procfs.Identity
	fd int
}

// pin opens a pidfd on id's pid and keeps it if the process is still id.
func pin(id procfs.Identity) (pinned, bool) {
	fd, err := unix.PidfdOpen(id.Pid, 0)
	if err != nil {
		return pinned{}, false
	}
	if now, _, ok := procfs.Identify(id.Pid); !ok || now != id {
		_ = unix.Close(fd)
		return pinned{}, false
	}
	return pinned{id, fd}, true
}

// kill stops every process of t that still lives, then what they forked
// since the refresh (a stopped process forks no more), and SIGKILLs them
// all: killed one by one while running, an escapee's child forked in
// between would be re-parented to init, out of reach.
func (t tree) kill() int {
	var all []pinned
	next := make([]procfs.Identity, 0, len(t))
	for id := range t {
		next = append(next, id)
	}
	known := tree{}
	for round := 0; len(next) > 0 && round < 100; round++ {
		var found []procfs.Identity
		for _, id := range next {
			if known[id] {
				continue
			}
			known[id] = true
			p, ok := pin(id)
			if !ok {
				continue
			}
			_ = unix.PidfdSendSignal(p.fd, unix.SIGSTOP, nil, 0)
			all = append(all, p)
			found = append(found, childrenOf(id.Pid)...)
		}
		next = found
	}
	for _, p := range all {
		_ = unix.PidfdSendSignal(p.fd, unix.SIGKILL, nil, 0)
		_ = unix.Close(p.fd)
	}
	return len(all)
}

// childrenOf identifies pid's live children.
func childrenOf(pid int) []procfs.Identity {
	kids, _ := procfs.Children(pid)
	var out []procfs.Identity
	for _, c := range kids {
		if id, ppid, ok := procfs.Identify(c); ok && ppid == pid {
			out = append(out, id)
		}
	}
	return out
}

// killByRunID SIGKILLs every process of this user whose environment holds
// LOCKRUN_RUN_ID=runID, round after round until a round finds none (what
// one forked before it died is found by the next), and reports how many.
// Each is pinned by a pidfd and its environment read again before the
// signal, so a reused pid is never signalled.
func killByRunID(runID string) int {
	if runID == "" {
		return 0
	}
	entry, self := "LOCKRUN_RUN_ID="+runID, os.Getpid()
	done := tree{} // signalled already: dying, not to be counted again
	for round := 0; round < 100; round++ {
		killed := 0
		for _, pid := range procfs.WithEnv(entry, uint32(os.Geteuid())) {
			id, _, ok := procfs.Identify(pid)
			if ok && pid != self && !done[id] && signalIfEnv(pid, entry) {
				done[id] = true
				killed++
			}
		}
		if killed == 0 {
			break
		}
	}
	return len(done)
}

// signalIfEnv SIGKILLs pid if, once pinned, its environment holds entry.
func signalIfEnv(pid int, entry string) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		return procfs.HasEnv(pid, entry) && syscall.Kill(pid, syscall.SIGKILL) == nil
	}
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return procfs.HasEnv(pid, entry) && unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}
