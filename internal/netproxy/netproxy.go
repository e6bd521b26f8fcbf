// Package netproxy is a TCP proxy for fault tests: it sits between a client
// and a real server on loopback and can hold traffic in either direction
// (a partition: TCP keeps the bytes and retransmits), delay it, or reset
// every connection. It counts what it forwards, so that a test can tell
// when the server last heard from a client.
package netproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Direction names one way through the proxy.
type Direction int

const (
	Up   Direction   = 1 << iota // client to server: requests
	Down                         // server to client: replies
	Both = Up | Down             // both ways
)

// Proxy forwards connections from Addr to an upstream address, and from
// the addresses that Also adds to theirs, all under the same faults.
type Proxy struct {
	ln       net.Listener
	upstream string
	more     []net.Listener // from Also

	mu      sync.Mutex
	held    Direction
	latency [2]time.Duration // by direction: Up, Down
	traffic [2]Traffic       // by direction: Up, Down
	holdAt  [2]int64         // by direction: the chunk count that holds it; 0 for none
	changed chan struct{}    // closed when held changes
	conns   map[net.Conn]struct{}
	dialed  int // connections accepted and forwarded, since Start
	wg      sync.WaitGroup
}

// Start listens on a free loopback port and forwards to upstream until the
// test ends.
func Start(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, upstream: upstream, changed: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.accept(ln, upstream)
	t.Cleanup(p.Close)
	return p
}

// Also listens on another free loopback port, forwarding to upstream
// under the same holds, latency and resets, and returns that port's
// host:port: one switch for a link to several servers (a partition that
// cuts a majority of a Redlock set). Traffic counts all of them.
func (p *Proxy) Also(t testing.TB, upstream string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.more = append(p.more, ln)
	p.mu.Unlock()
	p.wg.Add(1)
	go p.accept(ln, upstream)
	return ln.Addr().String()
}

// Addr is the host:port clients should dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Hold stops forwarding in dir (added to what is already held); bytes wait
// in the proxy and in the kernel, as on a partitioned link.
func (p *Proxy) Hold(dir Direction) { p.setHeld(p.heldNow() | dir) }

// HoldAfter forwards n more chunks in dir (Up or Down), then holds it, as
// Hold does: a fault that falls between two requests, whatever the
// scheduling of the test.
func (p *Proxy) HoldAfter(dir Direction, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holdAt[index(dir)] = p.traffic[index(dir)].Chunks + int64(n)
}

// Heal forwards everything again, held bytes first.
func (p *Proxy) Heal() { p.setHeld(0) }

// SetLatency delays every chunk forwarded in dir from now on by d.
func (p *Proxy) SetLatency(dir Direction, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, one := range []Direction{Up, Down} {
		if dir&one != 0 {
			p.latency[index(one)] = d
		}
	}
}

// index is the slot of one direction (Up or Down) in per-direction arrays.
func index(dir Direction) int {
	if dir == Down {
		return 1
	}
	return 0
}

// Traffic is what the proxy forwarded in one direction.
type Traffic struct {
	Chunks int64     // reads passed on, each in one write
	Bytes  int64     // bytes passed on
	Last   time.Time // when the last chunk began to be written; zero if none
}

// Traffic reports what was forwarded in dir (Up or Down) so far. The
// server cannot have read the last request before Traffic(Up).Last.
func (p *Proxy) Traffic(dir Direction) Traffic {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.traffic[index(dir)]
}

// Connections is how many connections the proxy has accepted and
// forwarded since it started, on every address it listens on.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dialed
}

// Reset closes every open connection; new ones are still accepted.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // RST, not FIN
		}
		_ = c.Close()
	}
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, ln := range p.more {
		_ = ln.Close()
	}
	p.mu.Unlock()
	p.Heal()
	p.Reset()
	p.wg.Wait()
}

func (p *Proxy) heldNow() Direction {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

func (p *Proxy) setHeld(d Direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setHeldLocked(d)
}

// setHeldLocked is setHeld for a caller that holds p.mu.
func (p *Proxy) setHeldLocked(d Direction) {
	p.held = d
	close(p.changed)
	p.changed = make(chan struct{})
}

// gate blocks while dir is held and returns the latency to apply.
func (p *Proxy) gate(dir Direction) time.Duration {
	for {
		p.mu.Lock()
		held, changed, latency := p.held&dir != 0, p.changed, p.latency[index(dir)]
		p.mu.Unlock()
		if !held {
			return latency
		}
		<-changed
	}
}

func (p *Proxy) accept(ln net.Listener, upstream string) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.dialed++
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(u, c, Up)
		go p.pipe(c, u, Down)
	}
}

// count records one chunk of n bytes forwarded in dir, whose write began
// at sent.
func (p *Proxy) count(dir Direction, n int, sent time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := &p.traffic[index(dir)]
	t.Chunks++
	t.Bytes += int64(n)
	t.Last = sent
	if at := &p.holdAt[index(dir)]; *at != 0 && t.Chunks >= *at {
		*at = 0
		p.setHeldLocked(p.held | dir) // this chunk goes on; the next waits
	}
}

// pipe copies src to dst through the gate of dir, then closes both.
func (p *Proxy) pipe(dst, src net.Conn, dir Direction) {
	defer p.wg.Done()
	defer func() {
		_ = dst.Close()
		_ = src.Close()
		p.mu.Lock()
		delete(p.conns, dst)
		delete(p.conns, src)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := p.gate(dir); d > 0 {
				time.Sleep(d)
			}
			// Counted as it is written, not after: the peer may read the
			// chunk, and act on it, before a count taken afterwards.
			p.count(dir, n, time.Now())
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			return
		}
	}
}
