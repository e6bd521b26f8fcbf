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
// Whether an older run is still alive when a newer one writes, or when a
// newer token is granted, is read from the kernel (the TCP state of the
// older run's connection: the last process holding it closes it as it
// dies), not from timestamps taken by goroutines that may run late.
type Oracle struct {
	ln net.Listener

	mu       sync.Mutex
	fence    uint64
	writes   []write
	lives    []*life
	overlaps map[[2]uint64]bool // older, newer token: older alive when newer wrote
	late     map[[2]uint64]bool // older, newer token: older alive when newer was granted
	wg       sync.WaitGroup
}

type write struct {
	token    uint64
	at       time.Time
	accepted bool
}

// life is one command run as the oracle saw it.
type life struct {
	token      uint64
	pid        int
	start, end time.Time // end is zero while the run is alive
	conn       net.Conn
}

// NewOracle listens on a free loopback port.
func NewOracle() (*Oracle, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o := &Oracle{ln: ln, overlaps: make(map[[2]uint64]bool), late: make(map[[2]uint64]bool)}
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
		token, pid, ok := parseWrite(sc.Text())
		if !ok {
			continue
		}
		now := time.Now()
		o.mu.Lock()
		if l == nil {
			l = &life{token: token, pid: pid, start: now, conn: c}
			o.lives = append(o.lives, l)
		}
		o.probeLocked(token, o.overlaps)
		w := write{token: token, at: now, accepted: token >= o.fence}
		if w.accepted {
			o.fence = token
		}
		o.writes = append(o.writes, w)
		o.mu.Unlock()
	}
	if l != nil {
		o.mu.Lock()
		l.end = time.Now()
		o.mu.Unlock()
	}
}

func parseWrite(line string) (token uint64, pid int, ok bool) {
	f := strings.Fields(line)
	if len(f) != 4 || f[0] != "w" {
		return 0, 0, false
	}
	token, err1 := strconv.ParseUint(f[1], 10, 64)
	pid, err2 := strconv.Atoi(f[2])
	return token, pid, err1 == nil && err2 == nil
}

// Granted records that token was granted now: every older run still
// alive is a late kill.
func (o *Oracle) Granted(token uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.probeLocked(token, o.late)
}

// probeLocked records in seen every run older than token whose
// connection is still established. Callers hold o.mu.
func (o *Oracle) probeLocked(token uint64, seen map[[2]uint64]bool) {
	for _, l := range o.lives {
		if l.token < token && l.end.IsZero() && !seen[[2]uint64{l.token, token}] && established(l.conn) {
			seen[[2]uint64{l.token, token}] = true
		}
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

// counts returns the overlaps and late kills seen.
func (o *Oracle) counts() (overlaps, late int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.overlaps), len(o.late)
}

// snapshot returns copies of the lives and writes seen so far.
func (o *Oracle) snapshot() ([]life, []write) {
	o.mu.Lock()
	defer o.mu.Unlock()
	lives := make([]life, len(o.lives))
	for i, l := range o.lives {
		lives[i] = *l
	}
	return lives, append([]write(nil), o.writes...)
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
