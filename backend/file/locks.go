package file

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// fileID names f's file as /proc/locks does: "MAJOR:MINOR:INODE", the
// device numbers in hex.
func fileID(f *os.File) (string, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino), nil
}

// procLock is one line of /proc/locks, which reads
// "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF"; a request blocked
// behind that lock has "->" after the number.
type procLock struct {
	id      string // the file, as fileID names it
	pid     int    // 0 when the kernel does not say (another pid namespace)
	shared  bool   // LOCK_SH (READ); else LOCK_EX (WRITE)
	blocked bool   // a request waiting in flock(2), not a lock held
}

// eachFlock calls fn for every flock line of /proc/locks until it returns
// false.
func eachFlock(fn func(procLock) bool) error {
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return err
	}
	defer locks.Close()
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		var l procLock
		if len(fields) > 1 && fields[1] == "->" {
			l.blocked = true
			fields = fields[1:]
		}
		if len(fields) < 6 || fields[1] != "FLOCK" {
			continue
		}
		pid, _ := strconv.Atoi(fields[4])
		l.id, l.pid, l.shared = fields[5], max(pid, 0), fields[3] == "READ"
		if !fn(l) {
			return nil
		}
	}
	return sc.Err()
}

// flockHolder reports whether a flock is held on f's file, whether it is
// shared (a semaphore's holders and waiters) and by which pid when the
// kernel says (0 when it does not, as from another pid namespace).
func flockHolder(f *os.File) (pid int, held, shared bool, err error) {
	want, err := fileID(f)
	if err != nil {
		return 0, false, false, err
	}
	err = eachFlock(func(l procLock) bool {
		if l.id == want && !l.blocked {
			pid, held, shared = l.pid, true, l.shared
			return false
		}
		return true
	})
	return pid, held, shared, err
}

// flockedFiles is the set of files on which a flock is held, by fileID.
func flockedFiles() (map[string]bool, error) {
	held := map[string]bool{}
	err := eachFlock(func(l procLock) bool {
		if !l.blocked {
			held[l.id] = true
		}
		return true
	})
	return held, err
}

// writerWaits reports whether an exclusive flock(2) request waits on f's
// file: a plain lock's waiter, queued in the kernel.
func writerWaits(f *os.File) (bool, error) {
	want, err := fileID(f)
	if err != nil {
		return false, err
	}
	waits := false
	err = eachFlock(func(l procLock) bool {
		waits = l.id == want && l.blocked && !l.shared
		return !waits
	})
	return waits, err
}
