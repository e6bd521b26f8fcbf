package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// withUser is raw logging in as user (with password pw when not empty),
// to database db when not empty.
func withUser(t *testing.T, raw, user, pw, db string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	if pw != "" {
		u.User = url.UserPassword(user, pw)
	}
	if db != "" {
		u.Path = "/" + db
	}
	return u.String()
}

// requirePassword makes the server ask user for a SCRAM password from
// loopback, ahead of the test server's trust rule, and reloads it.
func requirePassword(t *testing.T, srv *pgtest.Server, user string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var hba string
	if err := c.QueryRow(ctx, "SHOW hba_file").Scan(&hba); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	rule := "host all " + user + " 127.0.0.1/32 scram-sha-256\n"
	if err := os.WriteFile(hba, append([]byte(rule), old...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		t.Fatal(err)
	}
}

// Refusals that retrying cannot cure are not outages: an unknown role, a
// wrong password and a missing privilege are permission errors (exit 77),
// a missing database or schema a configuration error (exit 78).
func TestConfigErrorsAreNotOutages(t *testing.T) {
	srv := pgtest.Start(t)
	suffix := strings.ToLower(rand.Text()[:8])
	pwUser, noPriv := "lockrun_pw_"+suffix, "lockrun_nopriv_"+suffix
	pgtest.Exec(t, srv.URL(), "CREATE ROLE "+pwUser+" LOGIN PASSWORD 'right-pw'")
	pgtest.Exec(t, srv.URL(), "CREATE ROLE "+noPriv+" LOGIN")
	pgtest.Exec(t, srv.URL(), "CREATE SCHEMA locked")
	pgtest.Exec(t, srv.URL(), "REVOKE ALL ON SCHEMA public FROM PUBLIC")
	pgtest.Exec(t, srv.URL(), "GRANT ALL ON SCHEMA public TO "+pwUser)
	requirePassword(t, srv, pwUser)
	cases := []struct {
		name, raw string
		want      error
	}{
		{"unknown role", withUser(t, srv.URL(), "nobody_"+suffix, "", ""), backend.ErrPermission},
		{"wrong password", withUser(t, srv.URL(), pwUser, "wrong-pw", ""), backend.ErrPermission},
		{"no privilege", withUser(t, srv.URL(), noPriv, "", ""), backend.ErrPermission},
		{"missing database", withUser(t, srv.URL(), "postgres", "", "nosuchdb_"+suffix), backend.ErrConfig},
		{"missing schema", pgtest.WithParam(t, srv.URL(), "lockrun_table", "nosuchschema.locks"), backend.ErrConfig},
		{"missing table, creating forbidden", pgtest.WithParam(t, pgtest.WithParam(t, srv.URL(), "lockrun_table", "locked.locks"), ParamCreateTable, "false"), backend.ErrConfig},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := open(t, c.raw)
			_, err := b.Acquire(t.Context(), "k", opts("h"))
			if !errors.Is(err, c.want) || errors.Is(err, backend.ErrUnavailable) || strings.Contains(err.Error(), "wrong-pw") {
				t.Errorf("Acquire = %v; want %v, not unavailable, without the password", err, c.want)
			}
		})
	}
	// The right password still works.
	b := open(t, withUser(t, srv.URL(), pwUser, "right-pw", ""))
	if _, err := b.Inspect(t.Context(), "k"); err != nil {
		t.Errorf("Inspect with the right password: %v", err)
	}
}

// A lease table made by an older lockrun lacks the record's columns: it is
// upgraded on first use when creating is allowed, and is a configuration
// error (with the fix) when it is not.
func TestOlderTableIsUpgraded(t *testing.T) {
	base := pgtest.Shared()
	raw := pgtest.Isolated(t, base)
	u, _ := url.Parse(raw)
	table := u.Query().Get("lockrun_table")
	pgtest.Exec(t, base, "CREATE TABLE "+table+" (key text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0), holder text NOT NULL, run_id text NOT NULL, expires_at timestamptz NOT NULL)")
	fixed := open(t, pgtest.WithParam(t, raw, ParamCreateTable, "false"))
	_, err := fixed.Acquire(t.Context(), "k", opts("h"))
	if !errors.Is(err, backend.ErrConfig) || !strings.Contains(err.Error(), "lockrun init") {
		t.Errorf("Acquire on an old table, creating forbidden = %v; want ErrConfig naming lockrun init", err)
	}
	o := opts("h")
	o.Info = backend.HolderInfo{User: "u"}
	l, err := open(t, raw).Acquire(t.Context(), "k", o)
	if err != nil {
		t.Fatalf("Acquire on an old table: %v", err)
	}
	defer l.Release(t.Context())
	if st, err := fixed.Inspect(t.Context(), "k"); err != nil || st.Info.User != "u" || st.Since.IsZero() {
		t.Errorf("Inspect after the upgrade = %+v, %v", st, err)
	}
}

// A server that refuses the release's question whether someone waits
// (pg_try_advisory_xact_lock not granted, missing, or its lock table
// full) still frees the lock: a run that never waits needs no advisory
// lock.
func TestReleaseWithoutAdvisoryLocks(t *testing.T) {
	srv := pgtest.Start(t)
	user := "lockrun_noadv_" + strings.ToLower(rand.Text()[:8])
	pgtest.Exec(t, srv.URL(), "CREATE ROLE "+user+" LOGIN")
	pgtest.Exec(t, srv.URL(), "GRANT ALL ON SCHEMA public TO "+user)
	pgtest.Exec(t, srv.URL(), "REVOKE EXECUTE ON FUNCTION pg_try_advisory_xact_lock(bigint) FROM PUBLIC")
	b := open(t, withUser(t, srv.URL(), user, "", ""))
	if b.sql.releaseBare == b.sql.release || b.sql.semReleaseBare == b.sql.semRelease {
		t.Fatal("the release statements without the question are the same as with it")
	}
	for _, o := range []backend.AcquireOptions{opts("h"), semOpts("h", 2)} {
		l, err := b.Acquire(t.Context(), "k", o)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Errorf("limit %d: Release: %v", o.EffectiveLimit(), err)
		}
		if st, err := b.Inspect(t.Context(), "k"); err != nil || st.Held {
			t.Errorf("limit %d: after Release: %+v, %v; want free", o.EffectiveLimit(), st, err)
		}
	}
}
