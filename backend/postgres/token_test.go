package postgres

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// grants takes and releases "k" on b n times and returns the tokens.
func grants(t *testing.T, b *Backend, n int) []backend.Token {
	t.Helper()
	var toks []backend.Token
	for range n {
		l, err := b.Acquire(t.Context(), "k", opts("h"))
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, l.Token())
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return toks
}

// The counter is the row: a deleted row or a dropped table must not make
// tokens start again.
func TestTokensGrowAcrossDataLoss(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	all := grants(t, b, 2)
	pgtest.Exec(t, pgtest.Shared(), "DELETE FROM "+b.Table())
	all = append(all, grants(t, b, 2)...)
	pgtest.Exec(t, pgtest.Shared(), "DROP TABLE "+b.Table())
	all = append(all, grants(t, b, 2)...)
	for i := 1; i < len(all); i++ {
		if all[i] <= all[i-1] {
			t.Fatalf("tokens %v (row deleted after 2, table dropped after 4) do not strictly increase", all)
		}
	}
}

// The token column is a bigint: a counter at its limit fails the grant
// with ErrTokenRange (exit 69), never a repeated or wrapped token, and
// leaves the row as it was.
func TestTokensStopAtTheLimit(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	grants(t, b, 1)
	pgtest.Exec(t, pgtest.Shared(), fmt.Sprintf("UPDATE %s SET token = %d", b.Table(), int64(math.MaxInt64-2)))
	if got := grants(t, b, 2); got[0] != math.MaxInt64-1 || got[1] != math.MaxInt64 {
		t.Errorf("tokens near the limit = %v, want %d, %d", got, int64(math.MaxInt64-1), int64(math.MaxInt64))
	}
	for _, wait := range []bool{false, true} {
		o := opts("h")
		o.Wait = wait
		if l, err := b.Acquire(t.Context(), "k", o); !errors.Is(err, backend.ErrTokenRange) || !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Acquire (wait %v) past the limit = %v, %v; want ErrTokenRange", wait, l, err)
		}
	}
	if st, err := b.Inspect(t.Context(), "k"); err != nil || st.Held || st.Token != math.MaxInt64 {
		t.Errorf("Inspect after the refused grants = %+v, %v; want free with the last token", st, err)
	}
}

// The lease expires on the server's clock: every grant measures it against
// ours (a server on this host agrees), for lockrun's skew warning.
func TestGrantsMeasureTheServersClock(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b, c := open(t, raw), open(t, raw)
	l, err := b.Acquire(t.Context(), "k", opts("h"))
	if err != nil {
		t.Fatal(err)
	}
	backendtest.WantNoSkew(t, "grant", l)
	got := make(chan backend.Lease, 1)
	go func() {
		o := opts("w")
		o.Wait = true
		w, err := c.Acquire(t.Context(), "k", o)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	time.Sleep(50 * time.Millisecond)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if w := <-got; w != nil {
		backendtest.WantNoSkew(t, "waiter's grant", w)
	}
}
