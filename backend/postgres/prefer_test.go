package postgres

import (
	"io"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"

	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/pgtest"
	"github.com/lockrun/lockrun/internal/testcert"
)

// With sslmode=prefer, the default, pgx connects twice to a server
// without TLS (the server says no to TLS on the first connection): two
// backend processes a session. A waiter's session at the front of the
// line, its second, then costs one; a run that does not wait asks the
// server nothing more.
func TestPreferWithoutTLSConnectsOnceAfterTheFirst(t *testing.T) {
	srv := pgtest.Start(t)
	px := netproxy.Start(t, srv.Addr())
	raw := "postgres://postgres@" + px.Addr() + "/postgres"
	b := open(t, raw)
	acquireRelease(t, b)
	if n := px.Connections(); n != 2 || b.conns.asked {
		t.Errorf("a run that did not wait made %d connections and asked the server %v; want 2 (TLS refused, then plaintext), no question", n, b.conns.asked)
	}
	holder := open(t, srv.URL())
	h, err := holder.Acquire(t.Context(), "k", opts("holder"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan backend.Lease, 1)
	go func() {
		o := opts("waiter")
		o.Wait = true
		l, err := open(t, raw).Acquire(t.Context(), "k", o)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	for deadline := time.Now().Add(5 * time.Second); px.Connections() < 5 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if err := h.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if n := px.Connections() - 2; n != 3 {
		t.Errorf("a waiter made %d connections, want 3 (2 for its first session, 1 at the front)", n)
	}
	if l != nil {
		l.Release(t.Context())
	}
}

// On a server with TLS, prefer still gets it for every session, on one
// connection each; require and disable keep their meaning.
func TestPreferWithTLSUsesIt(t *testing.T) {
	srv := pgtest.StartTLS(t, testcert.Write(t))
	for _, tc := range []struct {
		host, query string
		tls         bool
	}{
		{"127.0.0.1", "", true}, {"localhost", "", true}, {"127.0.0.1", "?sslmode=prefer", true},
		{"127.0.0.1", "?sslmode=require", true}, {"127.0.0.1", "?sslmode=disable", false},
	} {
		px := netproxy.Start(t, srv.Addr())
		_, port, _ := net.SplitHostPort(px.Addr())
		raw := "postgres://postgres@" + net.JoinHostPort(tc.host, port) + "/postgres" + tc.query
		b := open(t, raw)
		acquireRelease(t, b)
		if got := sessionTLS(t, b); got != tc.tls {
			t.Errorf("%s: the first session's TLS = %v, want %v", raw, got, tc.tls)
		}
		if got := secondSessionTLS(t, b); got != tc.tls {
			t.Errorf("%s: the second session's TLS = %v, want %v", raw, got, tc.tls)
		}
		if n := px.Connections(); n != 2 {
			t.Errorf("%s: two sessions made %d connections, want 2", raw, n)
		}
	}
}

// A server that answers SSLRequest with neither yes nor no (one too old to
// know it), or says yes and then fails the handshake, gets a plaintext
// session on a new connection from pgx; when the server then says it has
// no TLS, the sessions after it go straight to plaintext.
func TestPreferFallsBackToPlaintext(t *testing.T) {
	srv := pgtest.Start(t)
	for _, answer := range []string{"E", "S"} {
		addr, conns := firstAnswers(t, srv.Addr(), answer)
		b := open(t, "postgres://postgres@"+addr+"/postgres")
		acquireRelease(t, b)
		if n := conns.Load(); n != 2 {
			t.Errorf("answer %q: %d connections, want 2 (the odd one, then plaintext)", answer, n)
		}
		if secondSessionTLS(t, b) {
			t.Errorf("answer %q: the session says it uses TLS", answer)
		}
		if n := conns.Load(); n != 3 {
			t.Errorf("answer %q: the second session made %d connections, want 1", answer, n-2)
		}
	}
}

// A TLS attempt that fails once, to a server that has TLS, leaves the
// first session in plaintext, as pgx's prefer does; the next session asks
// for TLS again and gets it.
func TestPreferKeepsAskingAServerWithTLS(t *testing.T) {
	srv := pgtest.StartTLS(t, testcert.Write(t))
	addr, conns := firstAnswers(t, srv.Addr(), "S")
	b := open(t, "postgres://postgres@"+addr+"/postgres")
	acquireRelease(t, b)
	if sessionTLS(t, b) {
		t.Error("the first session says it uses TLS, though its TLS attempt failed")
	}
	if !secondSessionTLS(t, b) {
		t.Error("the second session is plaintext on a server with TLS")
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (the failed TLS attempt, plaintext, then TLS)", n)
	}
}

func acquireRelease(t *testing.T, b *Backend) {
	t.Helper()
	l, err := b.Acquire(t.Context(), "k", opts("h"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// sessionTLS says whether a pooled session of b is encrypted.
func sessionTLS(t *testing.T, b *Backend) bool {
	t.Helper()
	c, err := b.conns.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer b.conns.put(c)
	return queryTLS(t, c)
}

// secondSessionTLS connects a session beside the pooled one, as a waiter
// does once it has asked the server about TLS on the first, and says
// whether it is encrypted.
func secondSessionTLS(t *testing.T, b *Backend) bool {
	t.Helper()
	first, err := b.conns.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer b.conns.put(first)
	b.conns.learn(t.Context(), first)
	return sessionTLS(t, b)
}

func queryTLS(t *testing.T, c *pgx.Conn) bool {
	t.Helper()
	var ssl bool
	if err := c.QueryRow(t.Context(), "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil {
		t.Fatal(err)
	}
	if ssl != encrypted(c) {
		t.Errorf("the server says the session's TLS is %v, pgx's connection %v", ssl, encrypted(c))
	}
	return ssl
}

// firstAnswers listens on a loopback port: its first connection gets
// answer to the client's first message and is closed; the others are
// forwarded to upstream. It returns the address and the count of
// connections accepted.
func firstAnswers(t *testing.T, upstream, answer string) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if n.Add(1) == 1 {
				_, _ = io.ReadFull(c, make([]byte, 8)) // SSLRequest
				_, _ = c.Write([]byte(answer))
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	return ln.Addr().String(), &n
}

// Only prefer for one host over TCP has a plaintext config to go on with.
func TestPlainAfterPreferIsForPreferOnly(t *testing.T) {
	for raw, want := range map[string]bool{
		"postgres://h1/db":                       true,
		"postgres://h1:6000/db?sslmode=prefer":   true,
		"postgres://h1,h2/db":                    false,
		"postgres://h1/db?sslmode=allow":         false,
		"postgres://h1/db?sslmode=require":       false,
		"postgres://h1/db?sslmode=verify-full":   false,
		"postgres://h1/db?sslmode=disable":       false,
		"postgres:///db?host=/run/postgresql":    false,
		"postgres://h1/db?sslnegotiation=direct": false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		s, err := parseURL(u)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		plain := plainAfterPrefer(s.conn)
		if (plain != nil) != want {
			t.Errorf("%s: plaintext config %v, want one: %v", raw, plain != nil, want)
			continue
		}
		if plain != nil && (plain.TLSConfig != nil || len(plain.Fallbacks) != 0 || plain.Host != "h1" || s.conn.TLSConfig == nil) {
			t.Errorf("%s: plaintext config %s:%d TLS %v fallbacks %d; the original's TLS %v", raw, plain.Host, plain.Port, plain.TLSConfig != nil, len(plain.Fallbacks), s.conn.TLSConfig != nil)
		}
	}
}
