package bench

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/internal/pgtest"
)

// postgresTarget is a private PostgreSQL (fsync off, as pgtest runs it),
// against a psql one-liner that holds a session advisory lock while psql
// runs the command (`\!`). pg_stat_statements counts the statements. A
// queue of 1000 lockruns (measure 6) holds 1000 sessions, and those of
// hand-offs still closing come on top: 1100, the tests' servers' limit,
// was too few (docs/backends/postgres.md), so this one has room for
// twice the queue; and a deadlock_timeout longer than any wait, as
// docs/backends/postgres.md asks of long lines: with the default 1 s,
// the deadlock checks of hundreds of queued sessions stall every new
// session's authentication past lockrun's connect timeout. Even so, on a
// slow phase of the host the server forked the last sessions of a line of
// 1000 later than lockrun's default connect_timeout (2 s, three tries):
// lockrun's URL raises it, as docs/backends/postgres.md advises for a busy
// server.
func (e *env) postgresTarget() target {
	srv := pgtest.StartWith(e.tb, "shared_preload_libraries=pg_stat_statements", "max_connections=2200", "deadlock_timeout=1h")
	ctx := context.Background()
	c, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		e.tb.Fatal(err)
	}
	e.tb.Cleanup(func() { c.Close(ctx) })
	if _, err := c.Exec(ctx, "CREATE EXTENSION pg_stat_statements"); err != nil {
		e.tb.Fatal(err)
	}
	// One measure runs at a time, so the server's advisory locks are all
	// the measured tool's. A lockrun waiter holds one, granted or not (its
	// place in the key's line); a psql waiter waits for the holder's.
	locks := func(where string) func(string) int {
		return func(string) int {
			var n int
			if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"+where).Scan(&n); err != nil {
				e.tb.Fatal(err)
			}
			return n
		}
	}
	psql := e.psql()
	tg := target{name: "postgres", addr: srv.Addr(), tools: func(addr string) (tool, tool) {
		url := pgtest.WithParam(e.tb, pgtest.WithHost(e.tb, srv.URL(), addr), "connect_timeout", "10")
		host, port, _ := strings.Cut(addr, ":")
		peer := tool{name: "psql advisory lock", binary: psql, queued: locks(" AND NOT granted"), maxQueue: 1000,
			cmd: func(key string, _ time.Duration, argv ...string) []string {
				id := "hashtext('" + key + "')"
				return []string{psql, "-X", "-q", "-o", "/dev/null", "-h", host, "-p", port, "-U", "postgres", "-d", "postgres",
					"-c", "SELECT pg_advisory_lock(" + id + ")", "-c", `\! exec ` + strings.Join(argv, " "),
					"-c", "SELECT pg_advisory_unlock(" + id + ")"}
			}}
		return e.lockrunTool(url, locks("")), peer
	}}
	tg.served = func() int64 {
		var n int64
		err := c.QueryRow(ctx, "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%pg_locks%'").Scan(&n)
		if err != nil {
			e.tb.Fatal(err)
		}
		return n
	}
	tg.rtt = func() time.Duration { return roundTrip(func() error { _, err := c.Exec(ctx, "SELECT 1"); return err }) }
	tg.lockrun, tg.peer = tg.tools(srv.Addr())
	return tg
}

// psql is the newest psql binary itself: Debian's /usr/bin/psql is a Perl
// wrapper that would add its own start-up to every run of the peer.
func (e *env) psql() string {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/psql")
	slices.SortFunc(found, func(a, b string) int { return version(a) - version(b) })
	if len(found) == 0 {
		return lookPath(e.tb, "psql")
	}
	return found[len(found)-1]
}

// version is the major version in /usr/lib/postgresql/VERSION/bin/psql.
func version(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}
