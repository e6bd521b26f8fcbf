package postgres

import (
	"context"
	"math"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/internal/pgtest"
)

// fenced is an initialised backend in a schema of its own and a session on
// the same server, for the statements a fenced writer runs.
func fenced(t *testing.T) (*Backend, *pgx.Conn) {
	t.Helper()
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	for range 2 { // init is safe to repeat
		if err := b.Init(t.Context()); err != nil {
			t.Fatalf("init: %v", err)
		}
	}
	u, _ := url.Parse(raw)
	q := u.Query()
	q.Del(ParamTable)
	u.RawQuery = q.Encode()
	c, err := pgx.Connect(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	schema := pgx.Identifier{b.table[0]}.Sanitize()
	if _, err := c.Exec(t.Context(), "SET search_path = "+schema); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(t.Context(), "CREATE TABLE items (id int PRIMARY KEY, v text, fence bigint NOT NULL DEFAULT 0); INSERT INTO items (id, v) VALUES (1, 'start')"); err != nil {
		t.Fatal(err)
	}
	return b, c
}

// fencedUpdate runs, in one transaction, an UPDATE of item 1 to v and then
// lockrun_fence(resource, token), committing only when both succeed.
func fencedUpdate(ctx context.Context, c *pgx.Conn, resource string, token int64, v string) error {
	return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "UPDATE items SET v = $1 WHERE id = 1", v); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "SELECT lockrun_fence($1, $2)", resource, token)
		return err
	})
}

func item(t *testing.T, c *pgx.Conn) (v string) {
	t.Helper()
	if err := c.QueryRow(t.Context(), "SELECT v FROM items WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestFenceRefusesAnOlderTokenAndRollsBackItsWrite(t *testing.T) {
	_, c := fenced(t)
	ctx := t.Context()
	if err := fencedUpdate(ctx, c, "invoices", 200, "new"); err != nil {
		t.Fatalf("newer token: %v", err)
	}
	if err := fencedUpdate(ctx, c, "invoices", 200, "new again"); err != nil {
		t.Fatalf("same token again must pass: %v", err)
	}
	err := fencedUpdate(ctx, c, "invoices", 199, "stale")
	if code := pgCode(err); code != FenceSQLState {
		t.Fatalf("older token: err %v (SQLSTATE %q), want SQLSTATE %s", err, code, FenceSQLState)
	}
	if !strings.Contains(err.Error(), "199") || !strings.Contains(err.Error(), "200") {
		t.Errorf("message %q should name both tokens", err)
	}
	if v := item(t, c); v != "new again" {
		t.Errorf("item is %q after the refused write, want %q", v, "new again")
	}
	if err := fencedUpdate(ctx, c, "payments", 1, "other resource"); err != nil {
		t.Errorf("another resource has its own fence: %v", err)
	}
}

func TestFenceComparesBigTokensExactly(t *testing.T) {
	_, c := fenced(t)
	hi := int64(math.MaxInt64)
	if err := fencedUpdate(t.Context(), c, "r", hi, "max"); err != nil {
		t.Fatal(err)
	}
	// hi-1 and hi are the same float64: a float comparison would pass it.
	if err := fencedUpdate(t.Context(), c, "r", hi-1, "max-1"); pgCode(err) != FenceSQLState {
		t.Fatalf("token 2^63-2 after 2^63-1: %v, want SQLSTATE %s", err, FenceSQLState)
	}
}

func TestFenceRejectsNull(t *testing.T) {
	_, c := fenced(t)
	_, err := c.Exec(t.Context(), "SELECT lockrun_fence('r', NULL)")
	if pgCode(err) != "22004" {
		t.Fatalf("null token: %v, want SQLSTATE 22004", err)
	}
}

// TestRowLevelFence is the documented alternative: each row keeps the
// token of its last writer, the UPDATE's WHERE checks it, and a row count
// other than 1 means the write was refused.
func TestRowLevelFence(t *testing.T) {
	_, c := fenced(t)
	update := func(token int64, v string) int64 {
		tag, err := c.Exec(t.Context(), "UPDATE items SET v = $2, fence = $1 WHERE id = 1 AND fence <= $1", token, v)
		if err != nil {
			t.Fatal(err)
		}
		return tag.RowsAffected()
	}
	if n := update(200, "new"); n != 1 {
		t.Fatalf("newer token updated %d rows, want 1", n)
	}
	if n := update(200, "same"); n != 1 {
		t.Fatalf("same token updated %d rows, want 1", n)
	}
	if n := update(199, "stale"); n != 0 {
		t.Fatalf("older token updated %d rows, want 0", n)
	}
	if v := item(t, c); v != "same" {
		t.Errorf("item is %q, want %q", v, "same")
	}
}

func TestFenceWithoutInitIsAnUndefinedFunction(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	err := b.session(t.Context(), func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SELECT "+b.Fence()+"('r', 1)")
		return err
	})
	if pgCode(err) != "42883" {
		t.Fatalf("before init: %v, want SQLSTATE 42883 (undefined function)", err)
	}
	if err := b.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	err = b.session(t.Context(), func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "SELECT "+b.Fence()+"('r', 1)")
		return err
	})
	if err != nil {
		t.Fatalf("after init: %v", err)
	}
}

func TestConcurrentInitsInstallTheFence(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	errs := make(chan error, 8)
	for range cap(errs) {
		b := open(t, raw)
		go func() { errs <- b.Init(t.Context()) }()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Errorf("concurrent init: %v", err)
		}
	}
}
