package postgres

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// open returns a backend for raw, closed when the test ends.
func open(t testing.TB, raw string) *Backend {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenURL(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func opts(holder string) backend.AcquireOptions {
	return backend.AcquireOptions{TTL: 2 * time.Second, Holder: holder, RunID: holder + "-" + fmt.Sprint(time.Now().UnixNano())}
}

func TestConformance(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	backendtest.Run(t, backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, raw) },
		TTL:  time.Second,
	})
}

func TestConcurrentFirstUseCreatesTheTable(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	const n = 32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		b := open(t, raw) // one process each, as far as the server knows
		wg.Go(func() {
			<-start
			l, err := b.Acquire(t.Context(), fmt.Sprint("k", i%4), opts(fmt.Sprint("h", i)))
			if err != nil && !errors.Is(err, backend.ErrHeld) {
				t.Errorf("first use %d: %v", i, err)
				return
			}
			if l != nil {
				l.Release(t.Context())
			}
		})
	}
	close(start)
	wg.Wait()
}

func TestTokensGrowAcrossForceRelease(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	var last backend.Token
	for i := range 5 {
		l, err := b.Acquire(t.Context(), "k", opts("h"))
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last {
			t.Fatalf("grant %d: token %d after %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := b.ForceRelease(t.Context(), "k"); err != nil {
			t.Fatal(err)
		}
		st, err := b.Inspect(t.Context(), "k")
		if err != nil || st.Held || st.Token != last {
			t.Fatalf("after ForceRelease: %+v, %v; want free with token %d", st, err, last)
		}
		if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Fatalf("Release after ForceRelease = %v, want ErrLost", err)
		}
	}
}

// A release must wake the first waiter in line, not every waiter: a herd
// would cost at least one statement per waiter and hand-off.
func TestReleaseWakesOnlyTheFrontWaiter(t *testing.T) { noHerd(t, 1) }

// noHerd checks that a hand-off of a lock of limit costs as many
// statements with 24 waiting as with 2, where a herd would add a try for
// each waiter woken.
func noHerd(t *testing.T, limit int) {
	t.Helper()
	const waiters = 24
	_, few := handOff(t, pgtest.Isolated(t, pgtest.Shared()), 2, 40, limit)
	_, many := handOff(t, pgtest.Isolated(t, pgtest.Shared()), waiters, 40, limit)
	t.Logf("statements per hand-off, limit %d: %.1f with 2 waiters, %.1f with %d", limit, few, many, waiters)
	if many-few > waiters/4 {
		t.Errorf("%.1f statements per hand-off with %d waiters, %.1f with 2: they are woken in a herd", many, waiters, few)
	}
}

func TestTokensNeverFallBelowTheServerClock(t *testing.T) {
	base := pgtest.Isolated(t, pgtest.Shared())
	before := backend.Token(time.Now().Add(-time.Second).UnixMicro())
	l, err := open(t, base).Acquire(t.Context(), "k", opts("h"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() < before {
		t.Errorf("token %d is below the clock %d: a re-created table would reissue tokens", l.Token(), before)
	}
}

func TestExpiredHolderCannotRenew(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	o := opts("h")
	o.TTL = 50 * time.Millisecond
	l, err := b.Acquire(t.Context(), "k", o)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // nobody took it, but it expired
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Renew after expiry = %v, want ErrLost", err)
	}
}

func TestNoDDLAtRunTimeNeedsInit(t *testing.T) {
	raw := pgtest.WithParam(t, pgtest.Isolated(t, pgtest.Shared()), ParamCreateTable, "false")
	b := open(t, raw)
	_, err := b.Acquire(t.Context(), "k", opts("h"))
	if !errors.Is(err, backend.ErrConfig) || !contains(err, "lockrun init") {
		t.Fatalf("Acquire without the table = %v, want ErrConfig naming lockrun init", err)
	}
	for range 2 { // Init is idempotent
		if err := b.Init(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Acquire(t.Context(), "k", opts("h")); err != nil {
		t.Fatalf("Acquire after Init: %v", err)
	}
}

func TestTableNameIsQuotedNotSpliced(t *testing.T) {
	base := pgtest.Isolated(t, pgtest.Shared())
	schema, _ := parseTable(queryParam(t, base, ParamTable))
	name := schema[0] + `.x"; DROP TABLE t; --`
	b := open(t, pgtest.WithParam(t, base, ParamTable, name))
	l, err := b.Acquire(t.Context(), "k", opts("h"))
	if err != nil {
		t.Fatalf("Acquire with table %q: %v", name, err)
	}
	l.Release(t.Context())
	if want := `"` + schema[0] + `"."x""; DROP TABLE t; --"`; b.Table() != want {
		t.Errorf("Table() = %s, want %s", b.Table(), want)
	}
}

func TestOpenURLRejectsWhatItCannotUse(t *testing.T) {
	for _, raw := range []string{
		"redis://localhost",
		"postgres://h/db?lockrun_table=a.b.c",
		"postgres://h/db?lockrun_table=",
		"postgres://h/db?lockrun_create_table=maybe",
		"postgres://h/db?lockrun_tabel=x",
		"postgres://h/db?sslmode=bogus",
	} {
		u, _ := url.Parse(raw)
		if _, err := OpenURL(u); !errors.Is(err, backend.ErrInvalidURL) {
			t.Errorf("OpenURL(%s) = %v, want ErrInvalidURL", raw, err)
		}
	}
	u, _ := url.Parse("postgresql://u:secret@h:6543/db?sslmode=require&lockrun_table=locks&connect_timeout=7")
	b, err := OpenURL(u)
	if err != nil {
		t.Fatal(err)
	}
	if b.Table() != `"public"."locks"` || b.conns.cfg.ConnectTimeout != 7*time.Second || b.conns.cfg.Port != 6543 {
		t.Errorf("table %s, connect timeout %v, port %d", b.Table(), b.conns.cfg.ConnectTimeout, b.conns.cfg.Port)
	}
	if _, ok := b.conns.cfg.RuntimeParams[ParamTable]; ok || contains(errors.New(b.addr), "secret") {
		t.Errorf("lockrun's parameters reached pgx, or the password the address: %v %s", b.conns.cfg.RuntimeParams, b.addr)
	}
}

// The message names the backend and says why it failed once, though
// sslmode=allow tries each host twice.
func TestDownAtStartIsUnavailableAtOnce(t *testing.T) {
	for _, raw := range []string{"postgres://postgres:hunter2@127.0.0.1:1/postgres", "postgres://postgres:hunter2@127.0.0.1:1/postgres?sslmode=allow"} {
		b := open(t, raw)
		begin := time.Now()
		_, err := b.Acquire(t.Context(), "k", opts("h"))
		if !errors.Is(err, backend.ErrUnavailable) || time.Since(begin) > time.Second || contains(err, "hunter2") {
			t.Errorf("Acquire from a closed port = %v after %v; want ErrUnavailable at once, no password", err, time.Since(begin))
		}
		named := "postgres " + strings.Replace(raw, "hunter2", "xxxxx", 1) + ": "
		if !contains(err, named) || strings.Count(err.Error(), "connection refused") != 1 {
			t.Errorf("Acquire from a closed port = %q; want the backend named and the reason said once", err)
		}
	}
}

// status and release are read by operators who may not have the right to
// create tables: they must not create the lease table.
func TestInspectAndForceReleaseCreateNoTable(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	st, err := b.Inspect(t.Context(), "k")
	if err != nil || !reflect.DeepEqual(st, backend.Status{Key: "k"}) {
		t.Errorf("Inspect without the table = %+v, %v; want free with token 0", st, err)
	}
	if err := b.ForceRelease(t.Context(), "k"); err != nil {
		t.Errorf("ForceRelease without the table = %v", err)
	}
	c, err := b.conns.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer b.conns.put(c)
	var exists bool
	if err := c.QueryRow(t.Context(), "SELECT to_regclass($1) IS NOT NULL", b.Table()).Scan(&exists); err != nil || exists {
		t.Errorf("table %s exists after Inspect and ForceRelease (%v)", b.Table(), err)
	}
}

func contains(err error, s string) bool {
	return err != nil && len(s) > 0 && strings.Contains(err.Error(), s)
}

func queryParam(t *testing.T, raw, name string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get(name)
}

func TestOperators(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	backendtest.RunOperators(t, backendtest.Operators{Harness: backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, raw) },
		TTL:  time.Second,
	}})
}

// Query values are passed to pgx as the user escaped them: a space
// written %20 must not reach the server as a plus sign, which pgx keeps.
// What url.Values accepted and libpq refuses still works: an '=' inside a
// value, a name without one. lockrun's own parameters decode a plus as a
// space, as they always did.
func TestURLParametersReachTheServerAsWritten(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared()) + "&options=-c%20lock_timeout=4321&application_name=nightly%20backfill+x==&sslmode&lockrun_table=spaced+name"
	b := open(t, raw)
	c, err := b.conns.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer b.conns.put(c)
	var timeout, app string
	if err := c.QueryRow(t.Context(), "SELECT current_setting('lock_timeout'), current_setting('application_name')").Scan(&timeout, &app); err != nil {
		t.Fatal(err)
	}
	if want := "nightly backfill+x=="; timeout != "4321ms" || app != want || b.Table() != `"public"."spaced name"` {
		t.Errorf("lock_timeout %q, application_name %q, table %s; want 4321ms, %q, public.\"spaced name\"", timeout, app, b.Table(), want)
	}
}
