package faults

import (
	"net"
	"strings"
	"testing"
	"time"
)

// tcpPair returns both ends of a loopback TCP connection: the oracle's end
// and the command's, which the test closes to end a run.
func tcpPair(t *testing.T) (ours, theirs net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	theirs, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if ours, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ours.Close(); theirs.Close() })
	return ours, theirs
}

// newTestOracle is an oracle whose writes the test records by hand, in
// the order the test chooses, as the readers' goroutines would.
func newTestOracle(t *testing.T) *Oracle {
	t.Helper()
	o, err := NewOracle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(o.Close)
	return o
}

// The race behind the false stale_accepted of file/1-no-fault: the older
// run's last line and the newer run's first line are read by two
// goroutines at about the same time. The newer run's reader takes its
// timestamp first but the older run's reader takes the mutex first, so the
// store accepts the older write before it has seen the newer token, while
// the timestamps say the newer run had already started.
func TestOracleOrdersWritesByArrivalNotByTimestamp(t *testing.T) {
	o := newTestOracle(t)
	oldConn, oldPeer := tcpPair(t)
	newConn, _ := tcpPair(t)
	t0 := time.Now()
	older := o.record(oldConn, nil, 5, 100, t0)
	oldPeer.Close() // the older run has died; its last line is still buffered
	o.record(oldConn, older, 5, 100, t0.Add(2*time.Millisecond))
	o.record(newConn, nil, 6, 101, t0.Add(time.Millisecond))

	r := analyze(o, nil)
	if r.StaleAccepted != 0 {
		t.Errorf("stale_accepted = %d, want 0: the store accepted the older write before it saw token 6", r.StaleAccepted)
	}
	if r.Runs != 2 || r.Overlaps != 0 {
		t.Errorf("runs = %d, overlaps = %d; want 2 and 0", r.Runs, r.Overlaps)
	}
}

// A zombie's write that reaches the store after a newer run's is refused
// and counted as stale_rejected: fencing at work, not a failure.
func TestOracleCountsZombieWritesAsRejected(t *testing.T) {
	o := newTestOracle(t)
	oldConn, _ := tcpPair(t)
	newConn, _ := tcpPair(t)
	now := time.Now()
	older := o.record(oldConn, nil, 5, 100, now)
	o.record(newConn, nil, 6, 101, now)
	o.record(oldConn, older, 5, 100, now)
	o.record(oldConn, older, 5, 100, now)

	r := analyze(o, nil)
	if r.StaleRejected != 2 || r.StaleAccepted != 0 {
		t.Errorf("stale_rejected, stale_accepted = %d, %d; want 2, 0", r.StaleRejected, r.StaleAccepted)
	}
	if r.Overlaps != 1 {
		t.Errorf("overlaps = %d, want 1: the older run was alive when the newer wrote", r.Overlaps)
	}
}

// Two runs given the same token: the fence cannot tell them apart, so the
// older run's writes after the newer one started are stale and accepted.
func TestOracleCountsADuplicateTokenAsStaleAccepted(t *testing.T) {
	o := newTestOracle(t)
	oldConn, _ := tcpPair(t)
	newConn, _ := tcpPair(t)
	now := time.Now()
	older := o.record(oldConn, nil, 7, 100, now)
	newer := o.record(newConn, nil, 7, 101, now)
	o.record(oldConn, older, 7, 100, now)
	o.record(newConn, newer, 7, 101, now)

	r := analyze(o, nil)
	if r.StaleAccepted != 1 || r.StaleRejected != 0 {
		t.Errorf("stale_accepted, stale_rejected = %d, %d; want 1, 0", r.StaleAccepted, r.StaleRejected)
	}
}

// A run whose reader ran late reaches the store only after a newer run's
// writes, as writes delayed in the network would: all its writes are
// refused and counted as stale_rejected, which fails nothing.
func TestOracleRefusesARunThatArrivesLate(t *testing.T) {
	o := newTestOracle(t)
	oldConn, oldPeer := tcpPair(t)
	newConn, _ := tcpPair(t)
	now := time.Now()
	o.record(newConn, nil, 9, 101, now)
	oldPeer.Close()
	older := o.record(oldConn, nil, 8, 100, now)
	o.record(oldConn, older, 8, 100, now)

	r := analyze(o, nil)
	judge(&r, Case{Name: "test"}, &attack{}, nil)
	if r.StaleRejected != 2 || r.StaleAccepted != 0 || r.Overlaps != 0 {
		t.Errorf("stale_rejected, stale_accepted, overlaps = %d, %d, %d; want 2, 0, 0", r.StaleRejected, r.StaleAccepted, r.Overlaps)
	}
	for _, f := range r.Failures {
		if !strings.Contains(f, "left processes behind") { // the test ends no run
			t.Errorf("failure %q for writes the fence refused", f)
		}
	}
}
