package zookeeper

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// session is one ZooKeeper session on its own connection: the lease of one
// holder or waiter, or the backend's own for status, list and release.
//
// go-zookeeper reconnects by itself and keeps the session while it can.
// When the server has expired it, the library quietly opens a new one on
// the same Conn; every ephemeral node of the old one is gone then. gone
// is closed at the first sign of that (an Expired state, or a session id
// other than the first), and every later call on the session fails.
type session struct {
	conn    *zk.Conn
	id      int64         // the first session id: the one our nodes belong to
	timeout time.Duration // as the server negotiated it
	gone    chan struct{} // closed once the session expired or was closed
	once    sync.Once
}

// dialWatch counts dial failures in a row across the connection's
// attempts, so that connect can give up once every server refused, and
// reads the session timeout the server negotiated from the connect reply
// (go-zookeeper does not expose it).
type dialWatch struct {
	base     func(network, addr string, timeout time.Duration) (net.Conn, error)
	servers  int
	failures chan error   // one per dial that failed
	timeout  atomic.Int64 // the last negotiated session timeout, in ms
}

func (d *dialWatch) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c, err := d.base(network, addr, timeout)
	if err != nil {
		select {
		case d.failures <- fmt.Errorf("%s: %w", addr, err):
		default:
		}
		return nil, err
	}
	return &sniffConn{Conn: c, d: d, sent: time.Now()}, nil
}

// sniffConn reads the negotiated timeout from the first reply on a
// connection: the ConnectResponse (length, protocol version, timeout). It
// also puts off the pings that requests make needless (see Write).
type sniffConn struct {
	net.Conn
	d   *dialWatch
	n   int
	hdr [12]byte

	mu   sync.Mutex
	sent time.Time   // when the last packet went out
	ping *time.Timer // a ping put off until the connection has been idle for an interval
}

// Write writes p, unless p is a ping and something went out less than a
// ping interval ago: go-zookeeper pings every third of the session
// timeout whatever else it sends, and a holder's renewal, a request every
// third of its TTL, tells the server as much, so the ping would double
// what a held lock costs the server. The ping is put off until the
// connection has been idle for a whole interval, and goes out then unless
// another packet did; the Java client pings so, only an idle connection.
// Nothing then goes longer without a packet than before, for the server's
// session timeout and for go-zookeeper's read deadline alike. It relies
// on go-zookeeper writing each packet in one call, as it does.
func (c *sniffConn) Write(p []byte) (int, error) {
	every := time.Duration(c.d.timeout.Load()) * time.Millisecond / 3
	c.mu.Lock()
	idle := time.Since(c.sent)
	if isPing(p) && every > 0 && idle < every {
		if c.ping == nil {
			c.ping = time.AfterFunc(every-idle, c.pingIdle)
		}
		c.mu.Unlock()
		return len(p), nil
	}
	c.wrote()
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// wrote notes a packet going out now, and drops the ping put off, if any.
// c.mu is held.
func (c *sniffConn) wrote() {
	c.sent = time.Now()
	if c.ping != nil {
		c.ping.Stop()
		c.ping = nil
	}
}

// pingIdle sends the ping that Write put off, unless a packet went out
// meanwhile. A failed write closes the connection, as go-zookeeper does
// (a part of a packet would leave the stream out of step); go-zookeeper
// sees it on its next read or write, and reconnects.
func (c *sniffConn) pingIdle() {
	c.mu.Lock()
	if c.ping == nil {
		c.mu.Unlock()
		return
	}
	c.wrote()
	c.mu.Unlock()
	if _, err := c.Conn.Write(pingPacket); err != nil {
		_ = c.Conn.Close()
	}
}

// Close closes the connection and drops the ping put off, if any.
func (c *sniffConn) Close() error {
	c.mu.Lock()
	if c.ping != nil {
		c.ping.Stop()
		c.ping = nil
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// pingPacket is a whole ping: length 8, xid -2, opcode 11.
var pingPacket = []byte{0, 0, 0, 8, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 11}

// isPing says whether p is one whole ping.
func isPing(p []byte) bool { return bytes.Equal(p, pingPacket) }

func (c *sniffConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.n < len(c.hdr) {
		k := copy(c.hdr[c.n:], p[:n])
		c.n += k
		if c.n == len(c.hdr) {
			if ms := int32(binary.BigEndian.Uint32(c.hdr[8:12])); ms > 0 {
				c.d.timeout.Store(int64(ms))
			}
		}
	}
	return n, err
}

// dialer is the plain or TLS dialer of cfg.
func dialer(cfg Config) func(network, addr string, timeout time.Duration) (net.Conn, error) {
	if cfg.TLS == nil {
		return net.DialTimeout
	}
	return func(network, addr string, timeout time.Duration) (net.Conn, error) {
		tc := cfg.TLS.Clone()
		if tc.ServerName == "" {
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, tc)
	}
}

// nopLogger keeps go-zookeeper quiet: its failures reach us as errors, and
// stderr is the command's too.
type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// connect opens a session asking for timeout and waits until the server
// granted it, within cfg.DialTimeout (or ctx's earlier end). It fails at
// once when every server refused the connection, and with errTooShort
// when the server granted less than timeout.
func connect(ctx context.Context, cfg Config, timeout time.Duration) (*session, error) {
	d := &dialWatch{base: dialer(cfg), servers: len(cfg.Servers), failures: make(chan error, 64)}
	s := &session{gone: make(chan struct{})}
	ready := make(chan struct{})
	var readyOnce sync.Once
	// The callback runs on the library's connection goroutine, one event
	// at a time; it waits until Connect has returned the Conn.
	stored := make(chan struct{})
	onEvent := func(ev zk.Event) {
		<-stored
		if ev.Type != zk.EventSession {
			return
		}
		switch ev.State {
		case zk.StateHasSession:
			readyOnce.Do(func() { s.id = s.conn.SessionID(); close(ready) })
			if s.conn.SessionID() != s.id {
				s.markGone()
			}
		case zk.StateExpired:
			s.markGone()
		}
	}
	// The protocol counts whole milliseconds and the client truncates:
	// round up, or a TTL with a fraction of one gets a session shorter
	// than it asked for, and is refused.
	timeout = (timeout + time.Millisecond - 1).Truncate(time.Millisecond)
	c, _, err := zk.Connect(cfg.Servers, timeout, zk.WithDialer(d.dial), zk.WithLogger(nopLogger{}),
		zk.WithLogInfo(false), zk.WithEventCallback(onEvent))
	if err != nil {
		return nil, err
	}
	s.conn = c
	close(stored)
	if err := s.await(ctx, cfg, d, ready); err != nil {
		c.Close()
		return nil, err
	}
	s.timeout = time.Duration(d.timeout.Load()) * time.Millisecond
	if cfg.User != "" {
		if _, err := call(ctx, cfg.RequestTimeout, func() (struct{}, error) {
			return struct{}{}, c.AddAuth("digest", []byte(cfg.User+":"+cfg.Password))
		}); err != nil {
			c.Close()
			return nil, fmt.Errorf("digest auth: %w", err)
		}
	}
	return s, nil
}

// await waits for the session to be granted, every server to refuse, ctx
// to end or the dial timeout to pass.
func (s *session) await(ctx context.Context, cfg Config, d *dialWatch, ready <-chan struct{}) error {
	t := time.NewTimer(cfg.DialTimeout)
	defer t.Stop()
	var last error
	for failed := 0; ; {
		select {
		case <-ready:
			return nil
		case err := <-d.failures:
			last, failed = err, failed+1
			if failed >= d.servers {
				return err
			}
		case <-t.C:
			if last != nil {
				return last
			}
			return fmt.Errorf("no session within %v", cfg.DialTimeout)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// markGone records that the session's nodes are gone.
func (s *session) markGone() { s.once.Do(func() { close(s.gone) }) }

// lost tells whether the session expired or was closed.
func (s *session) lost() bool {
	select {
	case <-s.gone:
		return true
	default:
		return false
	}
}

// close ends the session: the server deletes its ephemeral nodes at once.
func (s *session) close() {
	s.markGone()
	s.conn.Close()
}

// call runs f, one request of the library (which takes no context), and
// returns its result, or ctx's cause when ctx ends or limit passes first.
// An abandoned request finishes in the background: the library fails it
// when its connection times out or closes.
func call[T any](ctx context.Context, limit time.Duration, f func() (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}
