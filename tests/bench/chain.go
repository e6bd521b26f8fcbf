package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/procfs"
)

// jobHold is how long each queued contender's command holds the lock: a
// short job. It gives the next in line the time that any real job gives it
// to get ready (the postgres backend, for one, connects a session to
// listen on when it reaches the front of the line), so that a hand-off
// measures the hand-off alone.
const jobHold = "20ms"

// chain is one drained queue: a holder whose command waits at a gate, n
// contenders queued behind it, then the gate opens and each command runs
// in turn, as soon as the one before it ended.
type chain struct {
	handoffs samples // each command's start − the previous one's end
	requests int64   // server requests from the gate's opening to the last exit
	// slope is how many times a waiting tool process woke per hand-off it
	// waited through (least squares over the waiters): 0 when a release
	// wakes the next in line alone, about 2 or more per herd or poll.
	slope float64
	// waiterPSS is the proportional set size of one queued waiter and its
	// children (lockrun's watchdog), kB: the mean over the queue.
	waiterPSS int64
}

// stampLine is what one stamp logged.
type stampLine struct {
	start, end int64 // CLOCK_REALTIME ns
	parent     int   // the tool that ran it
	wakeups    int64 // the tool's context switches when it started
}

// runChain queues n contenders of tl behind a holder on a new key, opens
// the gate and waits for the queue to drain. served counts the server's
// requests (nil: no server); whileQueued, if not nil, runs once all n
// wait, before the gate opens.
func (e *env) runChain(tl tool, n int, served func() int64, whileQueued func()) (chain, error) {
	key := e.key("chain")
	log, gate := filepath.Join(e.dir, key+".log"), filepath.Join(e.dir, key+".gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		return chain{}, err
	}
	holder, err := startStamped(tl.cmd(key, 0, e.stampArgs("-gate", gate, "-log", log)...))
	if err != nil {
		return chain{}, err
	}
	var waiters []*waiter
	opened := false
	defer func() {
		if !opened { // a failure, or a Fatal: the queue drains once the holder is gone
			holder.kill()
		}
		for _, w := range waiters {
			_ = w.wait()
		}
		_ = holder.cmd.Wait()
	}()
	for i := range n {
		argv := tl.cmd(key, 0, e.stampArgs("-hold", jobHold, "-log", log, "-parent-wakeups")...)
		w, err := startWaiter(argv, filepath.Join(e.dir, fmt.Sprintf("%s-%d.stderr", key, i)))
		if err != nil {
			return chain{}, err
		}
		waiters = append(waiters, w)
		// In batches: the state measured is n waiting, not n arriving at
		// once (a thousand new sessions at once on two cores outlast a
		// client's connect timeout).
		if (i+1)%startBatch == 0 && i+1 < n {
			if err := e.waitQueued(tl, key, i+1, waiters); err != nil {
				return chain{}, err
			}
		}
	}
	if err := e.waitQueued(tl, key, n, waiters); err != nil {
		return chain{}, err
	}
	if whileQueued != nil {
		whileQueued()
	}
	switches := make(map[int]int64, n) // each waiter's context switches so far
	var pss int64
	for _, w := range waiters {
		pid := w.cmd.Process.Pid
		switches[pid] = procfs.Switches(pid)
		pss += rollupKB(pid, "Pss")
		for _, c := range children(pid) {
			pss += rollupKB(c, "Pss")
		}
	}
	before := count(served)
	if err := open(gate); err != nil {
		return chain{}, err
	}
	opened = true
	for _, w := range waiters {
		if err := w.wait(); err != nil {
			return chain{}, err
		}
	}
	waiters = nil
	c, err := drained(log, n, count(served)-before, switches)
	if err != nil {
		return chain{}, fmt.Errorf("%s: %w", tl.name, err)
	}
	c.waiterPSS = pss / int64(n)
	return c, nil
}

// stampTime is a stamp's clock reading, to the microsecond.
func stampTime(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000000") }

// startBatch is how many waiters of a chain start before the bench waits
// for them to queue.
const startBatch = 20

// count calls served, or returns 0 when there is no server to ask.
func count(served func() int64) int64 {
	if served == nil {
		return 0
	}
	return served()
}

// open lets the holder's stamp through its gate.
func open(gate string) error {
	f, err := os.OpenFile(gate, os.O_WRONLY, 0) // the stamp is blocked reading it
	if err != nil {
		return err
	}
	return f.Close()
}

// settle is how long contenders that keep no queue get to start polling.
func settle(n int) time.Duration { return 300*time.Millisecond + time.Duration(n)*10*time.Millisecond }

// queueTimeout is how long n contenders get to queue: a peer that is a
// Python program (kazoo) takes a few hundred milliseconds of CPU to start,
// and a hundred of them share two cores.
func queueTimeout(n int) time.Duration { return max(30*time.Second, time.Duration(n)*time.Second) }

// waitQueued waits until n contenders wait on key (or, for a tool that
// polls, for them to have started). It fails at once when one of the
// waiters started has exited: a queue that lost one never fills.
func (e *env) waitQueued(tl tool, key string, n int, started []*waiter) error {
	if tl.queued == nil {
		time.Sleep(settle(n))
		return exitedEarly(started)
	}
	limit := queueTimeout(n)
	for deadline := time.Now().Add(limit); tl.queued(key) < n; time.Sleep(5 * time.Millisecond) {
		if err := exitedEarly(started); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d of %d contenders queued on %s after %v", tl.name, tl.queued(key), n, key, limit)
		}
	}
	return nil
}

// drained reads a drained chain's stamps in the order they ran; switches
// holds each waiter's context switches when the gate opened.
func drained(log string, n int, requests int64, switches map[int]int64) (chain, error) {
	lines, err := readStamps(log)
	if err != nil {
		return chain{}, err
	}
	if len(lines) != n+1 {
		return chain{}, fmt.Errorf("%s: %d commands ran, want %d", log, len(lines), n+1)
	}
	slices.SortFunc(lines, func(a, b stampLine) int { return int(a.start - b.start) })
	c := chain{requests: requests}
	for i := 1; i < len(lines); i++ {
		if a, b := lines[i-1], lines[i]; b.start < a.end {
			return chain{}, fmt.Errorf("%s: two commands ran at once: one under pid %d from %s to %s, the next under pid %d from %s",
				log, a.parent, stampTime(a.start), stampTime(a.end), b.parent, stampTime(b.start))
		}
		c.handoffs = append(c.handoffs, time.Duration(lines[i].start-lines[i-1].end))
	}
	c.slope = slope(lines[1:], switches)
	return c, nil
}

// slope fits w = a + slope·i over the waiters in the order they ran, where
// w is how often the waiter's tool woke between the gate's opening and its
// turn.
func slope(waiters []stampLine, switches map[int]int64) float64 {
	n := float64(len(waiters))
	if n < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for i, w := range waiters {
		x, y := float64(i), float64(w.wakeups-switches[w.parent])
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

func readStamps(path string) ([]stampLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []stampLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l stampLine
		var pid int
		if _, err := fmt.Sscan(sc.Text(), &l.start, &l.end, &pid, &l.parent, &l.wakeups); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}
