package e2e_test

import (
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend/postgres"
	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// These tests run the real lockrun binary against PostgreSQL.

func TestPostgresDownAtStartExits69Fast(t *testing.T) {
	e := withBackend("postgres://postgres:hunter2@127.0.0.1:1/postgres")
	lockruntest.Binary(t) // built before the clock starts
	for _, quiet := range []bool{false, true} {
		args := []string{"run", "k", "--", "true"}
		if quiet {
			args = append([]string{"run", "-q"}, args[1:]...)
		}
		begin := time.Now()
		r := lockruntest.Run(t, e, args...)
		took := time.Since(begin)
		// The runner's bounded retries take 0.6s; the rest is slack for a
		// loaded CI machine.
		if r.Code != 69 || strings.Count(r.Stderr, "\n") != 1 || took > 3*time.Second || strings.Contains(r.Stderr, "hunter2") {
			t.Errorf("quiet=%v: exit %d after %v, stderr %q; want 69 within 3s, one line, no password", quiet, r.Code, took, r.Stderr)
		}
	}
}

func TestPostgresInitThenRunWithoutDDL(t *testing.T) {
	noDDL := pgtest.WithParam(t, pgtest.Isolated(t, pgtest.Shared()), postgres.ParamCreateTable, "false")
	if r := lockruntest.Run(t, withBackend(noDDL), "run", "k", "--", "true"); r.Code != 78 || !strings.Contains(r.Stderr, "lockrun init") {
		t.Errorf("run before init: exit %d, %q; want 78 (EX_CONFIG) naming lockrun init", r.Code, r.Stderr)
	}
	for range 2 {
		if r := lockruntest.Run(t, withBackend(noDDL), "init"); r.Code != 0 || !strings.Contains(r.Stdout, "ready") {
			t.Fatalf("init: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
		}
	}
	if r := lockruntest.Run(t, withBackend(noDDL), "run", "k", "--", "true"); r.Code != 0 {
		t.Errorf("run after init: exit %d, %q", r.Code, r.Stderr)
	}
}

// A link that stops forwarding while the command runs: lockrun must kill
// the command before the server's lease can expire, and exit 76; the next
// holder's token is higher.
func TestPostgresHeldLinkKillsTheCommandBeforeTheLeaseExpires(t *testing.T) {
	direct := pgtest.Isolated(t, pgtest.Shared())
	proxy := netproxy.Start(t, "127.0.0.1:5432")
	dir := t.TempDir()
	pidFile, tokFile := filepath.Join(dir, "pid"), filepath.Join(dir, "token")
	cmd := lockruntest.Start(t, withBackend(pgtest.WithHost(t, direct, proxy.Addr())), "run", "--ttl", "3s", "k", "--",
		"sh", "-c", "echo $LOCKRUN_FENCING_TOKEN > "+tokFile+"; echo $$ > "+pidFile+"; exec sleep 60")
	pid, _ := strconv.Atoi(lockruntest.WaitLine(t, pidFile))
	first, _ := strconv.ParseUint(lockruntest.WaitLine(t, tokFile), 10, 64)
	time.Sleep(1500 * time.Millisecond) // past a renewal or so

	proxy.Hold(netproxy.Both)
	time.Sleep(20 * time.Millisecond) // let a renewal already forwarded commit
	expires := serverExpiry(t, direct, "k")
	for lockruntest.Alive(pid) && time.Now().Before(expires.Add(time.Second)) {
		time.Sleep(time.Millisecond)
	}
	died := time.Now()
	if margin := expires.Sub(died); margin <= 0 {
		t.Errorf("command died %v after the server's lease expired", -margin)
	} else {
		t.Logf("command died %v before the server's lease expired (ttl 3s)", margin.Round(time.Millisecond))
	}
	if code := lockruntest.ExitCode(t, cmd); code != 76 {
		t.Errorf("lockrun exit %d, want 76", code)
	}
	proxy.Heal()
	r := lockruntest.Run(t, withBackend(direct), "run", "k", "--", "sh", "-c", "echo $LOCKRUN_FENCING_TOKEN")
	if next, _ := strconv.ParseUint(strings.TrimSpace(r.Stdout), 10, 64); r.Code != 0 || next <= first {
		t.Errorf("next holder: exit %d, token %q after %d", r.Code, r.Stdout, first)
	}
}

// serverExpiry reads the lease's expiry on the server's clock, which is
// this machine's clock.
func serverExpiry(t *testing.T, raw, key string) time.Time {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := postgres.OpenURL(u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := pgx.Connect(t.Context(), pgtest.Shared())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	var at time.Time
	if err := c.QueryRow(t.Context(), "SELECT expires_at FROM "+b.Table()+" WHERE key = $1", key).Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}
