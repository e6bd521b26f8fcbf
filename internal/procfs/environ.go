package procfs

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// Identity is what tells one process from a later one given the same pid:
// the pid and the start time (clock ticks since boot) the kernel keeps.
type Identity struct {
	Pid   int
	Start uint64
}

// Identify reads the live (non-zombie) process pid's parent and start time.
func Identify(pid int) (id Identity, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Identity{}, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Identity{}, 0, false
	}
	// state ppid pgrp session tty tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime priority nice threads
	// itrealvalue starttime
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || string(f[0]) == "Z" {
		return Identity{}, 0, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	return Identity{pid, start}, ppid, err1 == nil && err2 == nil
}

// HasEnv tells whether the environment pid started with holds entry
// ("NAME=value") exactly. A process may rewrite that memory; one that
// cleared its environment with exec (env -i) no longer has it.
func HasEnv(pid int, entry string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, e := range bytes.Split(b, []byte{0}) {
		if string(e) == entry {
			return true
		}
	}
	return false
}

// WithEnv lists the processes of user uid (the owner of /proc/PID, their
// effective uid) whose environment holds entry: it reads every process's
// /proc entry, and the environment of uid's only.
func WithEnv(entry string, uid uint32) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name(), &st) != nil || st.Uid != uid {
			continue
		}
		if HasEnv(pid, entry) {
			out = append(out, pid)
		}
	}
	return out
}
