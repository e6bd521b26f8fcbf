// Package faults attacks the real lockrun binary under faults and counts
// what went wrong: overlapping command runs, stale writes accepted by a
// fenced store, commands killed late, tokens that did not grow, orphans.
// Its tests are the harness; see docs/reliability.md.
package faults

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Oracle is a fenced store on loopback. Each command run (and anything it
// forks, which inherits the connection) writes "w TOKEN PID SEQ" lines;
// the store accepts a write when its token is at least the highest it has
// accepted. The connection's first line marks the run's start and its EOF,
// when the last process holding it has died, the run's end.
//
// Every write is judged under the store's mutex, at the moment and in the
// order the store takes it, as a real fenced store would: timestamps
// taken by the goroutines that read the lines order nothing, since the
// goroutine that read first may take the mutex last. Whether an older run
// is still alive when a newer one writes, or when a newer token is
// granted, is read from the kernel (the TCP state of the older run's
// connection: the last process holding it closes it as it dies).
//
// Which run is older is told by the tokens, not by the order in which the
// store first heard of them: a run whose reader ran late reaches the store
// after a newer one, as a write delayed in the network would, and is
// refused; that tokens follow the grants is checked apart from the store.
//
// For a semaphore (lockrun run --limit N) the oracle counts how many runs
// are alive at once: a write, or a grant, while N runs with older tokens
// are still alive means more than N at once, and every such older run
// counts as an overlap (a late kill) with the newer one. N 1 is the plain
// lock's rule: any older run alive.
type Oracle struct {
	ln    net.Listener
	limit int // how many runs may be alive at once

	mu       sync.Mutex
	fence    uint64           // the highest token accepted
	latest   map[uint64]*life // per token, the run that the store heard of last
	counted  storeCounts
	lives    []*life
	overlaps map[[2]uint64]bool // older, newer token: older alive when newer wrote
	late     map[[2]uint64]bool // older, newer token: older alive when newer was granted
	peak     int                // the most runs seen alive at once, at a write
	wg       sync.WaitGroup
}

// storeCounts are the store's verdicts on the writes it took.
type storeCounts struct {
	staleAccepted int // accepted, but another run had the same token since
	staleRejected int // refused: a token below one the store had accepted
}

// life is one command run as the oracle saw it.
type life struct {
	token      uint64
	pid        int
	start, end time.Time // when the first line was read and the connection closed; end is zero while the run is alive
	termed     time.Time // when the command reported its first SIGTERM (mode "stubborn"); zero if none
	conn       net.Conn
}

// NewOracle listens on a free loopback port, for runs of which up to limit
// may be alive at once (1: a plain lock).
func NewOracle(limit int) (*Oracle, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o := &Oracle{ln: ln, limit: max(limit, 1), latest: make(map[uint64]*life), overlaps: make(map[[2]uint64]bool), late: make(map[[2]uint64]bool)}
	o.wg.Add(1)
	go o.serve()
	return o, nil
}

// Addr is where commands connect.
func (o *Oracle) Addr() string { return o.ln.Addr().String() }

// Close stops accepting, closes the connections of runs still alive (the
// orphans analyze has counted) and waits for their readers.
func (o *Oracle) Close() {
	o.ln.Close()
	o.mu.Lock()
	for _, l := range o.lives {
		l.conn.Close()
	}
	o.mu.Unlock()
	o.wg.Wait()
}

func (o *Oracle) serve() {
	defer o.wg.Done()
	for {
		c, err := o.ln.Accept()
		if err != nil {
			return
		}
		o.wg.Add(1)
		go o.handle(c)
	}
}

func (o *Oracle) handle(c net.Conn) {
	defer o.wg.Done()
	defer c.Close()
	var l *life
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		kind, token, pid, ok := parseLine(sc.Text())
		switch {
		case !ok:
		case kind == "w":
			l = o.record(c, l, token, pid, time.Now())
		case kind == "t" && l != nil:
			o.termed(l, time.Now())
		}
	}
	if l != nil {
		o.mu.Lock()
		l.end = time.Now()
		o.mu.Unlock()
	}
}

// record offers one write of the run l (nil for the connection's first
// line) to the store and returns the run. now is when the line was read:
// it dates the run's start for the faults, and orders nothing.
func (o *Oracle) record(c net.Conn, l *life, token uint64, pid int, now time.Time) *life {
	o.mu.Lock()
	defer o.mu.Unlock()
	if l == nil {
		l = &life{token: token, pid: pid, start: now, conn: c}
		o.lives = append(o.lives, l)
		o.latest[token] = l
	}
	older := o.olderAliveLocked(token)
	o.peak = max(o.peak, len(older)+1)
	o.excessLocked(older, token, o.overlaps)
	o.judgeLocked(l, token)
	return l
}

// judgeLocked accepts or refuses a write of run l with token, as a fenced
// store does, and counts the verdict. Callers hold o.mu.
func (o *Oracle) judgeLocked(l *life, token uint64) {
	if token < o.fence {
		o.counted.staleRejected++ // a zombie's write, turned away
		return
	}
	o.fence = token
	// A newer run with a higher token would have raised the fence above
	// this one: only a run with the same token can make it stale.
	if o.latest[token] != l {
		o.counted.staleAccepted++
	}
}

// parseLine reads "w TOKEN PID SEQ" (a write) or "t TOKEN PID SEQ" (the
// command got SIGTERM).
func parseLine(line string) (kind string, token uint64, pid int, ok bool) {
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "w" && f[0] != "t" {
		return "", 0, 0, false
	}
	token, err1 := strconv.ParseUint(f[1], 10, 64)
	pid, err2 := strconv.Atoi(f[2])
	return f[0], token, pid, err1 == nil && err2 == nil
}

// termed records when run l first reported a SIGTERM.
func (o *Oracle) termed(l *life, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if l.termed.IsZero() {
		l.termed = now
	}
}

// Granted records that token was granted now: every older run still
// alive is a late kill.
func (o *Oracle) Granted(token uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.excessLocked(o.olderAliveLocked(token), token, o.late)
}

// olderAliveLocked is the tokens of the runs older than token whose
// connection is still established. Callers hold o.mu.
func (o *Oracle) olderAliveLocked(token uint64) []uint64 {
	var older []uint64
	for _, l := range o.lives {
		if l.token < token && l.end.IsZero() && established(l.conn) {
			older = append(older, l.token)
		}
	}
	return older
}

// excessLocked records in seen a pair of each older run with token when
// they and token's run are more than the limit. Callers hold o.mu.
func (o *Oracle) excessLocked(older []uint64, token uint64, seen map[[2]uint64]bool) {
	if len(older) < o.limit {
		return
	}
	for _, t := range older {
		seen[[2]uint64{t, token}] = true
	}
}

// established tells whether the peer of c has not closed it yet.
func established(c net.Conn) bool {
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return false
	}
	state := uint8(0)
	_ = raw.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.SOL_TCP, unix.TCP_INFO); err == nil {
			state = info.State
		}
	})
	return state == unix.BPF_TCP_ESTABLISHED
}

// counts returns the overlaps and late kills seen, the most runs alive
// at once, and the store's verdicts.
func (o *Oracle) counts() (overlaps, late, peak int, store storeCounts) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.overlaps), len(o.late), o.peak, o.counted
}

// snapshot returns copies of the runs seen so far.
func (o *Oracle) snapshot() []life {
	o.mu.Lock()
	defer o.mu.Unlock()
	lives := make([]life, len(o.lives))
	for i, l := range o.lives {
		lives[i] = *l
	}
	return lives
}

// lifeOf returns the run with token, if it has started.
func (o *Oracle) lifeOf(token uint64) (life, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.lives {
		if l.token == token {
			return *l, true
		}
	}
	return life{}, false
}
