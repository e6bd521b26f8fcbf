// Package procfs reads the process tree from /proc.
package procfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
)

// Descendants lists the live (non-zombie) descendants of root, read from
// /proc. It is a snapshot: a process forked during the walk may be missed,
// which is why killers call it until it comes back empty.
func Descendants(root int) []int {
	children := make(map[int][]int)
	each(func(pid int, st stat) {
		children[st.ppid] = append(children[st.ppid], pid)
	})
	var out []int
	queue := children[root]
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		out = append(out, pid)
		queue = append(queue, children[pid]...)
	}
	return out
}

// Children lists pid's children, zombies included, from the children
// files of its threads: a few small reads, where Descendants reads every
// process of the machine. The kernel keeps a zombie in its parent's list
// until the parent reaps it, so only the parent's own reaping can make an
// entry vanish while the lists are read. It reports false when a list
// cannot be read, as on a kernel without them (CONFIG_PROC_CHILDREN).
func Children(pid int) ([]int, bool) {
	tasks, err := os.ReadDir(taskDir(pid))
	if err != nil {
		return nil, false
	}
	var out []int
	for _, t := range tasks {
		kids, err := threadChildren(pid, t.Name())
		switch {
		case err == nil:
			out = append(out, kids...)
		case errors.Is(err, fs.ErrNotExist) && !exists(taskDir(pid)+t.Name()):
			// the thread has exited
		default:
			return nil, false
		}
	}
	return out, true
}

// ThreadChildren is Children read from the lists of the given threads of
// pid only, for a caller that knows which of its threads can have
// children. It reports false when one of those lists cannot be read.
func ThreadChildren(pid int, tids ...int) ([]int, bool) {
	var out []int
	for _, tid := range tids {
		kids, err := threadChildren(pid, strconv.Itoa(tid))
		if err != nil {
			return nil, false
		}
		out = append(out, kids...)
	}
	return out, true
}

func threadChildren(pid int, tid string) ([]int, error) {
	b, err := os.ReadFile(taskDir(pid) + tid + "/children")
	if err != nil {
		return nil, err
	}
	var kids []int
	for _, f := range bytes.Fields(b) {
		if c, err := strconv.Atoi(string(f)); err == nil {
			kids = append(kids, c)
		}
	}
	return kids, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func taskDir(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/task/" }

// GroupAlive tells whether a live (non-zombie) process of group pgid is
// left; unlike kill(-pgid, 0) it does not count the dead awaiting reaping.
func GroupAlive(pgid int) bool {
	alive := false
	each(func(_ int, st stat) { alive = alive || st.pgrp == pgid })
	return alive
}

// stat is what this package reads of /proc/pid/stat.
type stat struct{ ppid, pgrp int }

// each calls f for every live (non-zombie) process.
func each(f func(pid int, st stat)) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if st, ok := read(pid); ok {
				f(pid, st)
			}
		}
	}
}

// read reads a live pid's /proc/pid/stat; zombies and vanished processes
// report false.
func read(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || string(f[0]) == "Z" {
		return stat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	return stat{ppid, pgrp}, err1 == nil && err2 == nil
}

// Switches sums the context switches, voluntary and involuntary, of all
// pid's threads so far: how often the process slept or was preempted. It
// is 0 when pid is gone.
func Switches(pid int) int64 {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return 0
	}
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			k, v, ok := bytes.Cut(line, []byte(":"))
			if ok && bytes.HasSuffix(k, []byte("voluntary_ctxt_switches")) {
				c, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
				n += c
			}
		}
	}
	return n
}
