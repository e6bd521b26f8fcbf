// Package netproxy is a TCP proxy for fault tests: it sits between a client
// and a real server on loopback and can hold traffic in either direction
// (a partition: TCP keeps the bytes and retransmits), delay it, or reset
// every connection.
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

// Proxy forwards connections from Addr to an upstream address.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu      sync.Mutex
	held    Direction
	latency [2]time.Duration // by direction: Up, Down
	changed chan struct{}    // closed when held changes
	conns   map[net.Conn]struct{}
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
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the host:port clients should dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Hold stops forwarding in dir (added to what is already held); bytes wait
// in the proxy and in the kernel, as on a partitioned link.
func (p *Proxy) Hold(dir Direction) { p.setHeld(p.heldNow() | dir) }

// Heal forwards everything again, held bytes first.
func (p *Proxy) Heal() { p.setHeld(0) }

// SetLatency delays every chunk forwarded in dir from now on by d.
func (p *Proxy) SetLatency(dir Direction, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if dir&Up != 0 {
		p.latency[0] = d
	}
	if dir&Down != 0 {
		p.latency[1] = d
	}
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
	p.held = d
	close(p.changed)
	p.changed = make(chan struct{})
}

// gate blocks while dir is held and returns the latency to apply.
func (p *Proxy) gate(dir Direction) time.Duration {
	for {
		p.mu.Lock()
		held, changed, latency := p.held&dir != 0, p.changed, p.latency[0]
		if dir == Down {
			latency = p.latency[1]
		}
		p.mu.Unlock()
		if !held {
			return latency
		}
		<-changed
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(u, c, Up)
		go p.pipe(c, u, Down)
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
