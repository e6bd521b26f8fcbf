package faults

import (
	"net"
	"slices"
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
func newTestOracle(t *testing.T) *Oracle { return newLimitOracle(t, 1) }

// newLimitOracle is newTestOracle for a semaphore of limit.
func newLimitOracle(t *testing.T, limit int) *Oracle {
	t.Helper()
	o, err := NewOracle(limit)
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

// semRuns starts n runs on o with tokens 1..n, each with one write, and
// returns the runs and their peers (closed to end a run).
func semRuns(t *testing.T, o *Oracle, n int) ([]*life, []net.Conn) {
	t.Helper()
	var lives []*life
	var peers []net.Conn
	for i := range n {
		ours, theirs := tcpPair(t)
		lives = append(lives, o.record(ours, nil, uint64(i+1), 100+i, time.Now()))
		peers = append(peers, theirs)
	}
	return lives, peers
}

// Under --limit 3, three runs alive at once are the semaphore at work: no
// overlap, and the peak says they shared.
func TestOracleSemaphoreAllowsUpToItsLimit(t *testing.T) {
	o := newLimitOracle(t, 3)
	lives, peers := semRuns(t, o, 3)
	for i, l := range lives {
		o.record(l.conn, l, uint64(i+1), 100+i, time.Now())
	}
	peers[0].Close() // run 1 ends: a fourth may come
	o.Granted(4)
	ours, _ := tcpPair(t)
	o.record(ours, nil, 4, 104, time.Now())

	r := analyze(o, nil)
	if r.Overlaps != 0 || r.LateKills != 0 || r.Peak != 3 {
		t.Errorf("overlaps, late kills, peak = %d, %d, %d; want 0, 0, 3", r.Overlaps, r.LateKills, r.Peak)
	}
	judge(&r, Case{Name: "test", Limit: 3, Quiet: true}, &attack{}, nil)
	for _, f := range r.Failures {
		if !strings.Contains(f, "left processes behind") && !strings.Contains(f, "runs and") {
			t.Errorf("failure %q for a semaphore within its limit", f)
		}
	}
}

// A fourth run alive beside three under --limit 3 is counted, not only a
// pair: each of the three older runs overlaps it, and the case fails.
func TestOracleSemaphoreCountsMoreThanItsLimit(t *testing.T) {
	o := newLimitOracle(t, 3)
	semRuns(t, o, 3)
	o.Granted(4) // three alive: the grant of a fourth is late
	ours, _ := tcpPair(t)
	o.record(ours, nil, 4, 104, time.Now())

	r := analyze(o, nil)
	if r.Overlaps != 3 || r.LateKills != 3 || r.Peak != 4 {
		t.Errorf("overlaps, late kills, peak = %d, %d, %d; want 3, 3, 4", r.Overlaps, r.LateKills, r.Peak)
	}
	judge(&r, Case{Name: "test", Limit: 3}, &attack{}, nil)
	if !slices.ContainsFunc(r.Failures, func(f string) bool { return strings.Contains(f, "4 commands alive at once under --limit 3") }) {
		t.Errorf("failures %q; want one for 4 commands alive at once", r.Failures)
	}
}

// Two runs alive under a plain lock are an overlap, as ever: the limit
// of 1 is the pairwise rule.
func TestOraclePlainLockIsALimitOfOne(t *testing.T) {
	o := newTestOracle(t)
	lives, _ := semRuns(t, o, 2)
	o.record(lives[1].conn, lives[1], 2, 101, time.Now())
	if r := analyze(o, nil); r.Overlaps != 1 || r.Peak != 2 {
		t.Errorf("overlaps, peak = %d, %d; want 1, 2", r.Overlaps, r.Peak)
	}
}

// A semaphore case in which no two commands ever ran at once proves
// nothing about the limit (the backend may have ignored it): it fails.
func TestOracleSemaphoreThatNeverSharedFails(t *testing.T) {
	o := newLimitOracle(t, 2)
	_, peers := semRuns(t, o, 1)
	peers[0].Close()
	ours, _ := tcpPair(t)
	o.record(ours, nil, 2, 101, time.Now())
	r := analyze(o, nil)
	judge(&r, Case{Name: "test", Limit: 2}, &attack{}, nil)
	if r.Peak != 1 || !slices.ContainsFunc(r.Failures, func(f string) bool { return strings.Contains(f, "let nobody share") }) {
		t.Errorf("peak %d, failures %q; want 1 and a failure", r.Peak, r.Failures)
	}
}

// Holders of a semaphore log their grants in any order: only a grant
// whose lockrun started after a higher token had been logged, or a
// repeated token, is a regression.
func TestOracleSemaphoreTokenRegressions(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	grants := []Attempt{
		{Token: 11, Started: at(0), Acquired: at(5)},
		{Token: 10, Started: at(1), Acquired: at(6)}, // logged after 11, asked before: fine
		{Token: 12, Started: at(7), Acquired: at(9)},
	}
	if n := sharedRegressions(grants); n != 0 {
		t.Errorf("concurrent grants logged out of order: %d regressions, want 0", n)
	}
	late := append(slices.Clone(grants), Attempt{Token: 9, Started: at(8), Acquired: at(10)}) // asked after 11 and 10 were logged
	if n := sharedRegressions(late); n != 1 {
		t.Errorf("a token below one logged before its lockrun started: %d regressions, want 1", n)
	}
	twice := append(slices.Clone(grants), Attempt{Token: 12, Started: at(8), Acquired: at(8)})
	if n := sharedRegressions(twice); n != 1 {
		t.Errorf("a repeated token: %d regressions, want 1", n)
	}
}
