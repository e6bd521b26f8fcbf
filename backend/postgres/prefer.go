package postgres

import (
	"crypto/tls"

	"github.com/jackc/pgx/v5"
)

// plainAfterPrefer is cfg without its TLS attempt when cfg is
// sslmode=prefer (the default) for a single host over TCP, else nil.
//
// pgx's prefer asks for TLS on one connection and, when the server says
// no, opens a second one in plaintext, so a server without TLS (a
// container's, a test server, many on private networks) starts two
// backend processes for every session, and a waiting lockrun opens
// two sessions. Once such a server has said that it has no TLS, the
// sessions after the first go straight to plaintext (see conns.learn).
// Everything about TLS is still pgx's own: nothing is sent in plaintext
// that pgx would have encrypted, but for a server that turns TLS on while
// lockrun runs, which prefer does not promise to notice.
func plainAfterPrefer(cfg *pgx.ConnConfig) *pgx.ConnConfig {
	if cfg.TLSConfig == nil || len(cfg.Fallbacks) != 1 {
		return nil
	}
	fb := cfg.Fallbacks[0]
	if fb.TLSConfig != nil || fb.Host != cfg.Host || fb.Port != cfg.Port {
		return nil // not prefer: require, verify-*, or several hosts
	}
	plain := cfg.Copy()
	plain.TLSConfig, plain.Fallbacks = nil, nil
	return plain
}

// encrypted says whether c's connection to the server is TLS.
func encrypted(c *pgx.Conn) bool {
	_, ok := c.PgConn().Conn().(*tls.Conn)
	return ok
}
