// Package pgtest gives lockrun's tests a PostgreSQL: the machine's shared
// server (a fresh schema per test, dropped afterwards), or a private server
// of their own that they can stop, freeze, thaw and restart.
package pgtest

import (
	"context"
	"crypto/rand"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

// EnvDSN names the variable that points the tests at a shared server.
const EnvDSN = "LOCKRUN_TEST_POSTGRES"

// DefaultDSN is the server that .ci/services.sh starts: trust
// authentication for user postgres on loopback.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Shared is the shared server's URL: $LOCKRUN_TEST_POSTGRES, or DefaultDSN.
func Shared() string {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return dsn
	}
	return DefaultDSN
}

// Isolated returns base with lockrun_table naming a table in a new schema
// of base's server, so that the test sees no other test's locks. The
// schema is dropped when the test ends. A server that cannot be reached
// skips the test, or fails it when CI is set (backendtest.NeedServer).
func Isolated(t testing.TB, base string) string {
	t.Helper()
	backendtest.NeedServer(t, "PostgreSQL at "+backend.Redact(base)+" (or set "+EnvDSN+")", ping(base))
	schema := "lockrun_test_" + strings.ToLower(rand.Text()[:12])
	Exec(t, base, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	t.Cleanup(func() { Exec(t, base, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	return WithParam(t, base, "lockrun_table", schema+".locks")
}

// WithParam returns raw with query parameter name set to value.
func WithParam(t testing.TB, raw, name, value string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	// The other parameters are kept as written, and the value is
	// percent-encoded with a space as %20: libpq and pgx read a plus sign
	// as itself, not as the space url.Values would make of it.
	kept := []string{url.QueryEscape(name) + "=" + strings.ReplaceAll(url.QueryEscape(value), "+", "%20")}
	for _, part := range strings.Split(u.RawQuery, "&") {
		if k, _, _ := strings.Cut(part, "="); part != "" && k != url.QueryEscape(name) {
			kept = append(kept, part)
		}
	}
	u.RawQuery = strings.Join(kept, "&")
	return u.String()
}

// WithHost returns raw with its host and port replaced by addr, e.g. to
// reach the server through a netproxy.
func WithHost(t testing.TB, raw, addr string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// Exec runs one statement on the server at dsn (a URL without lockrun's
// parameters), failing the test on error.
func Exec(t testing.TB, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("pgtest: PostgreSQL at %s (set %s, or run .ci/services.sh): %v", dsn, EnvDSN, err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

// ping connects to the server at dsn once.
func ping(dsn string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	return c.Close(ctx)
}
