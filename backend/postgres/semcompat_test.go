package postgres

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// prevAcquire is the previous release's acquire statement, as an older
// lockrun beside this one sends it.
func prevAcquire(t *testing.T, b *Backend) string {
	sql, err := os.ReadFile("testdata/acquire_0.sql")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(sql), "{{table}}", b.Table())
}

// An older lockrun on the same table: its plain acquire finds a key held
// while any semaphore holder is live, and takes it, with a higher token,
// once they are gone; its plain row in turn keeps this lockrun's
// semaphore out with a LimitError and reads as a plain holder.
func TestOlderLockrunAndSemaphores(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	old := prevAcquire(t, b)
	c, err := b.conns.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer b.conns.put(c)
	oldAcquire := func(run string) (backend.Token, bool) {
		t.Helper()
		var tok backend.Token
		var holder, runID string
		var left, server int64
		var ours bool
		err := c.QueryRow(t.Context(), old, "k", "old-host", run, int64(time.Minute/time.Microsecond), `{"user":"old"}`).
			Scan(&tok, &holder, &runID, &left, &ours, &server)
		if err != nil {
			t.Fatal(err)
		}
		return tok, ours
	}
	a, err := b.Acquire(t.Context(), "k", semOpts("a", 2))
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Acquire(t.Context(), "k", semOpts("b", 2))
	if err != nil {
		t.Fatal(err)
	}
	release(t, a)
	if _, ours := oldAcquire("old-1"); ours {
		t.Fatal("an older lockrun took a key that a semaphore holder holds")
	}
	release(t, second)
	tok, ours := oldAcquire("old-2")
	if !ours || tok <= second.Token() {
		t.Fatalf("older lockrun after the semaphore: ours %v, token %d after %d", ours, tok, second.Token())
	}
	st, err := b.Inspect(t.Context(), "k")
	if err != nil || !st.Held || st.RunID != "old-2" || st.Info.User != "old" || st.Limit != 0 || st.Holders != nil {
		t.Errorf("Inspect of an older lockrun's plain row = %+v, %v", st, err)
	}
	var mix *backend.LimitError
	if _, err := b.Acquire(t.Context(), "k", semOpts("c", 2)); !errors.As(err, &mix) || mix.Have != 1 {
		t.Errorf("semaphore Acquire over an older lockrun's plain lock = %v, want a LimitError (have 1)", err)
	}
}

// A semaphore needs no column or table beyond the plain lock's: with DDL
// forbidden at run time, lockrun init's table (the previous release's
// layout) serves it, and without the table the error names init.
func TestSemaphoreOnAnInitTable(t *testing.T) {
	b := open(t, pgtest.WithParam(t, pgtest.Isolated(t, pgtest.Shared()), ParamCreateTable, "false"))
	if _, err := b.Acquire(t.Context(), "k", semOpts("h", 2)); !errors.Is(err, backend.ErrConfig) || !contains(err, "lockrun init") {
		t.Fatalf("semaphore Acquire without the table = %v, want ErrConfig naming lockrun init", err)
	}
	if err := b.ReleaseHolder(t.Context(), "k", 1); !errors.Is(err, backend.ErrLost) {
		t.Errorf("ReleaseHolder without the table = %v, want ErrLost", err)
	}
	if err := b.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := b.Acquire(t.Context(), "k", semOpts("h", 2))
	if err != nil {
		t.Fatalf("semaphore Acquire after Init: %v", err)
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Errorf("Renew: %v", err)
	}
	release(t, l)
}
