package postgres

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// dialFunc opens a network connection, as pgconn.Config.DialFunc does.
type dialFunc = pgconn.DialFunc

// oneConnectionPrefer makes sslmode=prefer, the default, cost one
// connection whatever the server says to TLS. pgx asks for TLS on one
// connection and, when the server answers no, opens a second one in
// plaintext: a server without TLS (a container's, a test server, many on
// private networks) starts two backend processes for every session lockrun
// opens, and a lockrun that waits opens several. libpq, as the protocol
// allows, goes on in plaintext on the same connection; so does this.
//
// What prefer protects does not change: TLS is negotiated with pgx's own
// configuration for the host, and when the server refuses it or the
// handshake fails the session is plaintext, as with pgx and libpq. Where
// pgx checks something around its own handshake (sslcertmode other than
// allow, sslnegotiation=direct), cfg is left as it is.
func oneConnectionPrefer(cfg *pgconn.Config, dial dialFunc) {
	if cfg.SSLCertMode != "allow" || cfg.SSLNegotiation == "direct" {
		return
	}
	all := append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...)
	// The TLS configuration by the address pgx dials: host:port, and the
	// server's IP:port once it said yes, which is where pgx sends a cancel
	// request (encrypted like the session it cancels).
	var tlsFor sync.Map
	var kept []*pgconn.FallbackConfig
	for i := 0; i < len(all); i++ {
		fc := all[i]
		// prefer is, for each host, an attempt with TLS and then the same
		// host without it.
		if i+1 < len(all) && fc.TLSConfig != nil && all[i+1].TLSConfig == nil && all[i+1].Host == fc.Host && all[i+1].Port == fc.Port {
			_, addr := pgconn.NetworkAddress(fc.Host, fc.Port)
			tlsFor.Store(addr, fc.TLSConfig)
			fc = all[i+1]
			i++
		}
		kept = append(kept, fc)
	}
	if len(kept) == len(all) {
		return // no host with prefer
	}
	cfg.Host, cfg.Port, cfg.TLSConfig, cfg.Fallbacks = kept[0].Host, kept[0].Port, nil, kept[1:]
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		tc, ok := tlsFor.Load(addr)
		if err != nil || !ok {
			return conn, err
		}
		conn, err = preferTLS(ctx, conn, tc.(*tls.Config))
		if err != nil && ctx.Err() == nil {
			return dial(ctx, network, addr) // plaintext, as pgx and libpq do for prefer
		}
		if _, secure := conn.(*tls.Conn); secure {
			tlsFor.Store(conn.RemoteAddr().String(), tc)
		}
		return conn, err
	}
}

// sslRequest is the SSLRequest message: its length, then the code
// 80877103.
var sslRequest = []byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}

// preferTLS asks the server on conn for TLS and returns the TLS
// connection if it agrees, or conn itself, in plaintext, if it says no.
// conn is closed on error: the server answered neither (one too old to
// know SSLRequest), the handshake failed, or ctx ended.
func preferTLS(ctx context.Context, conn net.Conn, tc *tls.Config) (net.Conn, error) {
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	answer := make([]byte, 1)
	_, err := conn.Write(sslRequest)
	if err == nil {
		_, err = io.ReadFull(conn, answer)
	}
	var out net.Conn = conn
	switch {
	case err != nil:
	case answer[0] == 'N':
	case answer[0] == 'S':
		t := tls.Client(conn, tc)
		err = t.HandshakeContext(ctx)
		out = t
	default:
		err = fmt.Errorf("the server answered SSLRequest with %q", answer[0])
	}
	if !stop() && err == nil { // ctx ended: the deadline may be in the past
		err = context.Cause(ctx)
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return out, nil
}
