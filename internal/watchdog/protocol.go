// Package watchdog is lockrun's second process, both ends of it: it holds
// the kill deadline so that the command dies by the deadline even when
// lockrun cannot act, frozen (SIGSTOP, a stalled cgroup, a VM steal) or
// SIGKILLed.
//
// lockrun starts it (Start) before the command, hands it the deadline
// (Guard), says which process group is the command's once it runs
// (Started), and moves the deadline on every renewal (Arm). The watchdog
// (Main) SIGKILLs the command's process group, its cgroup and lockrun's
// other descendants when the deadline passes without a newer one, or at
// once when its socket closes because lockrun died; without a cgroup also
// what it saw of lockrun's tree at the last deadline message, and what
// carries the run's LOCKRUN_RUN_ID (see escape.go). A deadline that passes
// before lockrun said the command started means lockrun was frozen between
// the grant and the exec: the watchdog then kills lockrun too, so that it
// can never start the command late. lockrun stops the watchdog once the
// command and everything it left behind are gone.
//
// The protocol: a SOCK_SEQPACKET socket on the watchdog's stdin; a packet
// is one or more messages of a tag byte and a big-endian int64. 'g' is the
// command's process group; 'd' the kill deadline in CLOCK_BOOTTIME
// nanoseconds (see internal/clock), which may carry the lock's open files
// (SCM_RIGHTS) for the watchdog to hold. Deadlines count suspend, as the
// servers' lease clocks do. A watchdog never sent a deadline guards no
// command: when lockrun goes, it goes quietly.
package watchdog

import (
	"encoding/binary"
	"strconv"
)

// Subcommand is the hidden lockrun command that runs Main: the watchdog
// where no ProgramName is installed beside lockrun.
const Subcommand = "watchdog"

// ProgramName is the watchdog's own program (cmd/lockrun-watchdog), which
// lockrun starts from its own directory (see Find). It links this package
// and the standard library only, so it starts in a fraction of the time
// lockrun, with every backend's client, would take to re-execute itself.
const ProgramName = "lockrun-watchdog"

// protocol names this package's protocol; Start passes it in the
// watchdog's environment and Main refuses another, so that a lockrun and
// a lockrun-watchdog from different releases (an upgrade half done) fail
// at once with a clear line rather than misread each other. Change it
// with the messages' meaning.
const protocol = "1"

// Program is how to start a watchdog: a binary, and the arguments that
// precede the protocol's own (lockrun's pid, the command's cgroup).
type Program struct {
	Path  string
	Args  []string
	RunID string // the run's LOCKRUN_RUN_ID: what the watchdog kills carries it
}

// ForRun is p for the run whose LOCKRUN_RUN_ID is runID.
func (p Program) ForRun(runID string) *Program {
	p.RunID = runID
	return &p
}

// Self is lockrun's own binary run as its watchdog (the hidden
// Subcommand).
var Self = Program{Path: "/proc/self/exe", Args: []string{Subcommand}}

// argv is the watchdog's full argument list; Main parses what follows
// p.Args.
func (p Program) argv(lockrun int, cgroupDir string) []string {
	argv := append([]string{p.Path}, p.Args...)
	argv = append(argv, strconv.Itoa(lockrun))
	if cgroupDir != "" {
		argv = append(argv, cgroupDir)
	}
	return argv
}

const (
	msgLen      = 9
	tagGroup    = 'g'
	tagDeadline = 'd'
)

func message(tag byte, v int64) []byte {
	msg := make([]byte, msgLen)
	msg[0] = tag
	binary.BigEndian.PutUint64(msg[1:], uint64(v))
	return msg
}
