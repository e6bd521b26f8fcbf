package postgres

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// A front waiter woken by a release takes the lock with take.sql, the
// hand-off's statement, on the session it listened on.
func TestWokenWaiterTakesWithTheHandOffStatement(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	holder, err := open(t, raw).Acquire(t.Context(), "k", lineOpts("holder"))
	if err != nil {
		t.Fatal(err)
	}
	got := waitFor(t, b, "k", lineOpts("waiter"))
	until(t, "the waiter at the front", func() bool { return lineOf(t, b, "k").front != 0 })
	time.Sleep(50 * time.Millisecond) // past its first try, asleep
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := granted(t, got)
	defer l.Release(t.Context())
	if l.Token() <= holder.Token() {
		t.Errorf("token %s after %s; want it higher", l.Token(), holder.Token())
	}
	lo := leftoverOf(l)
	if lo == nil {
		t.Fatal("the granted waiter has no leftover")
	}
	if q := lastQuery(t, b, lo.listener.PgConn().PID()); len(q) < 100 || !strings.HasPrefix(b.sql.take, q) {
		t.Errorf("the listening session last ran %.60q; want take.sql", q)
	}
}

// take.sql takes only a free row, and the fallback says who holds one
// that is not: a live holder, a released one still in its minimum hold,
// a row that is gone.
func TestTakeTakesOnlyAFreeRow(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	c, err := b.conns.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer b.conns.put(c)

	first, err := b.takeBounded(t.Context(), c, "k", opts("first")) // no row: acquire.sql makes it
	if err != nil {
		t.Fatalf("take with no row: %v", err)
	}
	o := opts("second")
	var held *backend.HeldError
	if _, err := b.takeBounded(t.Context(), c, "k", o); !errors.As(err, &held) || held.Status.Holder != "first" {
		t.Fatalf("take of a held row = %v; want held by first", err)
	}
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	second, err := b.takeBounded(t.Context(), c, "k", o)
	if err != nil || second.Token() <= first.Token() || second.TTL() != o.TTL {
		t.Fatalf("take of a released row = %v, %v; want a lease with a token above %s", second, err, first.Token())
	}
	if st, _ := b.Inspect(t.Context(), "k"); st.Holder != "second" || st.RunID != o.RunID || st.Token != second.Token() {
		t.Errorf("row after take: %+v", st)
	}

	o = opts("third")
	o.MinHold = time.Minute
	if _, err := b.takeBounded(t.Context(), c, "k", o); err == nil {
		t.Fatal("took a row held by second")
	}
	if err := second.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	third, err := b.takeBounded(t.Context(), c, "k", o)
	if err != nil {
		t.Fatal(err)
	}
	if err := third.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.takeBounded(t.Context(), c, "k", opts("fourth")); !errors.As(err, &held) || held.Status.Holder != "third" {
		t.Errorf("take within a released lease's minimum hold = %v; want held by third", err)
	}
}

// A table that an older lockrun re-created meanwhile, without a column
// take.sql sets, is upgraded by acquire.sql, which take falls back to.
func TestTakeFallsBackOnAnOlderTable(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	first, err := b.Acquire(t.Context(), "k", opts("first"))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, err := b.conns.get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer b.conns.put(c)
	if _, err := c.Exec(t.Context(), "ALTER TABLE "+b.Table()+" DROP COLUMN released_at"); err != nil {
		t.Fatal(err)
	}
	l, err := b.takeBounded(t.Context(), c, "k", opts("second"))
	if err != nil || l.Token() <= first.Token() {
		t.Fatalf("take on a table without released_at = %v, %v; want a lease above token %s", l, err, first.Token())
	}
}
