package postgres

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/pgtest"
	"github.com/lockrun/lockrun/internal/testcert"
)

// A run's acquire and release take one session. With sslmode=prefer, the
// default, pgx connected twice to a server without TLS (the server said
// no to TLS on the first connection): two backend processes a session.
func TestPreferWithoutTLSConnectsOnce(t *testing.T) {
	srv := pgtest.Start(t)
	px := netproxy.Start(t, srv.Addr())
	b := open(t, "postgres://postgres@"+px.Addr()+"/postgres")
	acquireRelease(t, b)
	if n := px.Connections(); n != 1 {
		t.Errorf("acquire and release made %d connections, want 1", n)
	}
	if sessionTLS(t, b) {
		t.Error("a session on a server without TLS says it uses TLS")
	}
}

// On a server with TLS, prefer still gets it, on one connection; require
// and disable keep their meaning.
func TestPreferWithTLSUsesIt(t *testing.T) {
	srv := pgtest.StartTLS(t, testcert.Write(t))
	for _, tc := range []struct {
		query string
		tls   bool
	}{{"", true}, {"?sslmode=prefer", true}, {"?sslmode=require", true}, {"?sslmode=disable", false}} {
		px := netproxy.Start(t, srv.Addr())
		b := open(t, "postgres://postgres@"+px.Addr()+"/postgres"+tc.query)
		acquireRelease(t, b)
		if n := px.Connections(); n != 1 {
			t.Errorf("%q: acquire and release made %d connections, want 1", tc.query, n)
		}
		if got := sessionTLS(t, b); got != tc.tls {
			t.Errorf("%q: session TLS = %v, want %v", tc.query, got, tc.tls)
		}
	}
}

// A server that answers SSLRequest with neither yes nor no (one too old to
// know it), or says yes and then fails the handshake, gets a plaintext
// session on a new connection, as pgx and libpq give it.
func TestPreferFallsBackToPlaintext(t *testing.T) {
	srv := pgtest.Start(t)
	for _, answer := range []string{"E", "S"} {
		addr, conns := firstAnswers(t, srv.Addr(), answer)
		b := open(t, "postgres://postgres@"+addr+"/postgres")
		acquireRelease(t, b)
		if n := conns.Load(); n != 2 {
			t.Errorf("answer %q: %d connections, want 2 (the odd one, then plaintext)", answer, n)
		}
		if sessionTLS(t, b) {
			t.Errorf("answer %q: the session says it uses TLS", answer)
		}
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
	var ssl bool
	if err := c.QueryRow(t.Context(), "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").Scan(&ssl); err != nil {
		t.Fatal(err)
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
				_, _ = io.ReadFull(c, make([]byte, len(sslRequest)))
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

// prefer becomes one attempt per host, in the URL's order; the other modes
// are pgx's own attempts.
func TestPreferIsOneAttemptPerHost(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want []string // host:port, and "+tls" where pgx makes the TLS handshake itself
	}{
		{"postgres://h1,h2:6000/db", []string{"h1:5432", "h2:6000"}},
		{"postgres://h1:5000,h2:6000/db?sslmode=prefer", []string{"h1:5000", "h2:6000"}},
		{"postgres://h1/db?sslmode=allow", []string{"h1:5432", "h1:5432+tls"}},
		{"postgres://h1,h2/db?sslmode=require", []string{"h1:5432+tls", "h2:5432+tls"}},
		{"postgres://h1/db?sslmode=disable", []string{"h1:5432"}},
		{"postgres://h1/db?sslcertmode=require", []string{"h1:5432+tls", "h1:5432"}},
		{"postgres:///db?host=/run/postgresql", []string{"/run/postgresql:5432"}},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		s, err := parseURL(u)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		c := s.conn.Config
		attempts := append([]*pgconn.FallbackConfig{{Host: c.Host, Port: c.Port, TLSConfig: c.TLSConfig}}, c.Fallbacks...)
		var got []string
		for _, a := range attempts {
			g := net.JoinHostPort(a.Host, fmt.Sprint(a.Port))
			if strings.HasPrefix(a.Host, "/") {
				g = a.Host + ":" + fmt.Sprint(a.Port)
			}
			if a.TLSConfig != nil {
				g += "+tls"
			}
			got = append(got, g)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: attempts %v, want %v", tc.url, got, tc.want)
		}
	}
}
