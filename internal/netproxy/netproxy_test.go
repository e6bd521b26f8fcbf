package netproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo serves a line echo on loopback.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(l))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// dial connects to addr, closed when the test ends.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func roundTrip(c net.Conn, r *bufio.Reader, timeout time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestHoldHealLatencyReset(t *testing.T) {
	p := Start(t, echo(t))
	c, r := dial(t, p.Addr())
	if l, err := roundTrip(c, r, time.Second); err != nil || l != "ping\n" {
		t.Fatalf("through the proxy: %q, %v", l, err)
	}
	for _, dir := range []Direction{Up, Down} {
		p.Hold(dir)
		if _, err := roundTrip(c, r, 100*time.Millisecond); err == nil {
			t.Fatalf("a round trip passed with direction %d held", dir)
		}
		p.Heal()
		c.SetDeadline(time.Now().Add(time.Second))
		if l, err := r.ReadString('\n'); err != nil || l != "ping\n" {
			t.Fatalf("held bytes not delivered after Heal: %q, %v", l, err)
		}
	}
	p.SetLatency(Both, 50*time.Millisecond)
	begin := time.Now()
	if _, err := roundTrip(c, r, time.Second); err != nil || time.Since(begin) < 100*time.Millisecond {
		t.Errorf("round trip with 50ms each way took %v (%v)", time.Since(begin), err)
	}
	p.SetLatency(Both, 0)
	p.Reset()
	if _, err := roundTrip(c, r, time.Second); err == nil {
		t.Error("connection still works after Reset")
	}
}

func TestTrafficCountsForwardedChunks(t *testing.T) {
	p := Start(t, echo(t))
	if tr := p.Traffic(Up); tr.Chunks != 0 || !tr.Last.IsZero() {
		t.Fatalf("traffic before any connection: %+v", tr)
	}
	c, r := dial(t, p.Addr())
	before := time.Now()
	for range 3 {
		if _, err := roundTrip(c, r, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []Direction{Up, Down} {
		tr := p.Traffic(dir)
		if tr.Chunks != 3 || tr.Bytes != 15 || tr.Last.Before(before) || tr.Last.After(time.Now()) {
			t.Errorf("direction %d after 3 round trips of 5 bytes: %+v", dir, tr)
		}
	}
	p.Hold(Up)
	held := p.Traffic(Up)
	c.Write([]byte("ping\n"))
	time.Sleep(50 * time.Millisecond)
	if tr := p.Traffic(Up); tr != held {
		t.Errorf("traffic moved while held: %+v, then %+v", held, tr)
	}
	p.Heal()
}

// A port added with Also forwards to its own upstream under the same
// holds as the first.
func TestAlsoSharesTheFaults(t *testing.T) {
	p := Start(t, echo(t))
	c, err := net.Dial("tcp", p.Also(t, echo(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if l, err := roundTrip(c, r, time.Second); err != nil || l != "ping\n" {
		t.Fatalf("through the second port: %q, %v", l, err)
	}
	p.Hold(Both)
	if _, err := roundTrip(c, r, 100*time.Millisecond); err == nil {
		t.Fatal("a round trip passed through the second port with the proxy held")
	}
	p.Heal()
}

func TestHoldAfterPassesThatManyChunks(t *testing.T) {
	p := Start(t, echo(t))
	c, r := dial(t, p.Addr())
	p.HoldAfter(Up, 2)
	for i := range 2 {
		if _, err := roundTrip(c, r, time.Second); err != nil {
			t.Fatalf("round trip %d of the 2 let through: %v", i+1, err)
		}
	}
	if _, err := roundTrip(c, r, 200*time.Millisecond); err == nil {
		t.Fatal("the third round trip went through; want Up held after two chunks")
	}
	p.Heal()
	c.SetDeadline(time.Now().Add(time.Second))
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Errorf("after Heal, the held request's echo = %q, %v", line, err)
	}
}
