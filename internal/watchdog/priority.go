package watchdog

import (
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// On a host whose cores are busy, a sleeper that wakes at its deadline
// waits for a core: up to 186 ms at nice 0 (and still at nice -20, since
// autogroups and cgroups share the CPU between groups whatever a task's own
// nice value) in the fault harness, and a SIGKILLed process as long again
// to run the exit that closes its files and sockets. The watchdog acts half
// the safety margin before the local deadline (50 ms at the smallest TTLs):
// too little for both. So where it may (root, CAP_SYS_NICE, or an
// RLIMIT_RTPRIO that allows it) the watchdog runs real-time, every thread
// of it (a goroutine that wakes needs a P, which any of the Go runtime's
// threads may hold), and hands the killed a higher priority still. It
// sleeps but for a few syscalls, so this costs the host nothing; where it
// may not, it still works, with less room.
const (
	rtPriority = 1   // SCHED_FIFO: above every normal task, below the kernel's own
	niceBoost  = -20 // where SCHED_FIFO is refused
)

// realtimeAfter is how long after its start the watchdog becomes
// real-time. Its own start-up, and the Go runtime's first busy
// millisecond (sysmon wakes every 20 µs until it finds nothing to do),
// would otherwise pre-empt lockrun and the command just as they start,
// on the host's cores: a short run took about 1 ms longer (median of 200,
// 2 cores) with a watchdog real-time from its first instruction. Its
// first deadline is at least a heartbeat away, far more than this.
const realtimeAfter = 10 * time.Millisecond

// realtimeDue tells whether the watchdog, real-time from rtAt on (all
// times CLOCK_BOOTTIME ns), must be so at now: once rtAt has come, or at
// once when its deadline (0 while it has none) is less than two
// realtimeAfter away, so that it sleeps real-time before any deadline.
func realtimeDue(now, rtAt, deadline int64) bool {
	return now >= rtAt || deadline != 0 && deadline-now < 2*int64(realtimeAfter)
}

// earliest is the sooner of two CLOCK_BOOTTIME times, 0 standing for
// none; 0 when both are.
func earliest(a, b int64) int64 {
	if a == 0 || b != 0 && b < a {
		return b
	}
	return a
}

// realtime is the attribute for one thread: SCHED_FIFO at prio. Threads it
// creates inherit it.
func realtime(prio uint32) *unix.SchedAttr {
	return &unix.SchedAttr{Policy: unix.SCHED_FIFO, Priority: prio}
}

// raisePriority makes every thread of the watchdog real-time, and those the
// Go runtime starts later, which inherit it; where that is refused it
// gives them niceBoost. The watchdog leads its own process group (Start
// puts it there), so the group's nice value is its threads'.
func raisePriority() {
	if !eachThread(os.Getpid(), realtime(rtPriority)) && unix.Getpgrp() == os.Getpid() {
		_ = unix.Setpriority(unix.PRIO_PGRP, 0, niceBoost)
	}
}

// settle ends the watchdog's real-time priority once its signals are
// sent: the hunt for stragglers and the wait for the killed to die walk
// /proc, work that must hold a core neither from the host nor from the
// killed. It keeps niceBoost where it may.
func settle() {
	eachThread(os.Getpid(), &unix.SchedAttr{Policy: unix.SCHED_NORMAL, Nice: niceBoost})
}

// hastenDeath gives the processes of group pgid, just SIGKILLed, the
// priority to exit at once: niceBoost for the group, real-time for the
// threads of its leader (the command), above the watchdog's own so that
// the watchdog never holds the core they need. A killed process never runs
// its own code again, only the kernel's exit; it still needs a core for
// that.
func hastenDeath(pgid int) {
	_ = unix.Setpriority(unix.PRIO_PGRP, pgid, niceBoost)
	eachThread(pgid, realtime(rtPriority+1))
}

// yield takes the watchdog pid, about to be killed with nothing left to
// guard, out of real time, if it is in it (from realtimeAfter after its
// start): the exit of its threads is work for no one, which at the
// real-time priority they hold would pre-empt the release and the next
// holder's start that share the cores with it (0.13 ms later out of
// 0.6 ms, the holder's reap to its release's request, on 2 cores). A
// watchdog not yet real-time is left as it is: a short run's watchdog
// would only exit later. A process may lower its child's priority
// without privilege.
func yield(pid int) {
	if attr, err := unix.SchedGetAttr(pid, 0); err == nil && attr.Policy == unix.SCHED_FIFO {
		eachThread(pid, &unix.SchedAttr{Policy: unix.SCHED_NORMAL})
	}
}

// eachThread gives every thread of pid attr, and tells whether it could
// for all of them.
func eachThread(pid int, attr *unix.SchedAttr) bool {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return false // gone already, or no /proc
	}
	ok := true
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			ok = unix.SchedSetAttr(tid, attr, 0) == nil && ok
		}
	}
	return ok
}
