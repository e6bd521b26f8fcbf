// Package procfs reads the process tree from /proc.
package procfs

import (
	"bytes"
	"os"
	"strconv"
)

// Descendants lists the live (non-zombie) descendants of root, read from
// /proc. It is a snapshot: a process forked during the walk may be missed,
// which is why killers call it until it comes back empty.
func Descendants(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := make(map[int][]int)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(pid); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
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

// parentOf reads the parent of a live pid from /proc/pid/stat; zombies and
// vanished processes report false.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || string(f[0]) == "Z" {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
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
