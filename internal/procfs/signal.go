package procfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Tree maps every live (non-zombie) descendant of root to its parent, read
// from /proc: a snapshot, as Descendants is.
func Tree(root int) map[int]int {
	children := make(map[int][]int)
	each(func(pid int, st stat) {
		children[st.ppid] = append(children[st.ppid], pid)
	})
	out := make(map[int]int)
	queue := []int{root}
	for len(queue) > 0 {
		parent := queue[0]
		queue = queue[1:]
		for _, pid := range children[parent] {
			out[pid] = parent
			queue = append(queue, pid)
		}
	}
	return out
}

// Signal sends sig to pid only if it is still the process that a walk
// found as ppid's child. It opens a pidfd first, which pins the process,
// then checks the parent: a pid reused since the walk is someone else's
// and is left alone. Without pidfds (Linux before 5.3) it falls back to
// kill(2). It reports whether the signal was sent.
func Signal(pid, ppid int, sig syscall.Signal) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		return syscall.Kill(pid, sig) == nil
	}
	if err != nil {
		return false // gone
	}
	defer unix.Close(fd)
	if st, ok := read(pid); !ok || st.ppid != ppid {
		return false // reused, re-parented or dead: a later walk finds what is still ours
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0) == nil
}

// SignalDescendants sends sig to every live descendant of root for which
// skip is false, each through Signal, and returns how many it signalled.
func SignalDescendants(root int, sig syscall.Signal, skip func(pid int) bool) int {
	n := 0
	for pid, ppid := range Tree(root) {
		if !skip(pid) && Signal(pid, ppid, sig) {
			n++
		}
	}
	return n
}

// CgroupProcs lists the processes in the cgroup v2 directory dir.
func CgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range bytes.Fields(b) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// Group is the process group of the live process pid.
func Group(pid int) (int, bool) {
	st, ok := read(pid)
	return st.pgrp, ok
}
