package redis

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// grantsFrom hand-sets key's token counter to start, then takes and
// releases the lock n times, and returns the tokens.
func grantsFrom(t *testing.T, srv *redistest.Server, b *Backend, key string, start uint64, n int) []backend.Token {
	t.Helper()
	if err := srv.Client(t).Set(t.Context(), b.names(key).counter, strconv.FormatUint(start, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	var toks []backend.Token
	for range n {
		l := backendtest.MustAcquire(t, b, key, opts("h", time.Minute))
		toks = append(toks, l.Token())
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return toks
}

// Lua numbers are doubles: above 2^53 a counter read into one repeats
// (the 992, 994, 996, 996, 996). Tokens must be exact up to the
// counter's limit, 2^63-1, and a grant past it fails with ErrTokenRange
// (exit 69), leaving the lock free and the counter as it was.
func TestTokensAreExactUpToTheLimit(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv.URL())
	const above53 = 1<<53 + 990
	if got := grantsFrom(t, srv, b, "k", above53, 5); !consecutive(got, above53+1) {
		t.Errorf("tokens after a counter at 2^53+990 = %v, want %d and the next four", got, uint64(above53+1))
	}
	if got := grantsFrom(t, srv, b, "k", math.MaxInt64-2, 2); !consecutive(got, math.MaxInt64-1) {
		t.Errorf("tokens near the counter's limit = %v, want %d, %d", got, int64(math.MaxInt64-1), int64(math.MaxInt64))
	}
	for _, wait := range []bool{false, true} {
		o := opts("h", time.Minute)
		o.Wait = wait
		if l, err := b.Acquire(t.Context(), "k", o); !errors.Is(err, backend.ErrTokenRange) || !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Acquire (wait %v) past the counter's limit = %v, %v; want ErrTokenRange", wait, l, err)
		}
	}
	st, err := b.Inspect(t.Context(), "k")
	if err != nil || st.Held || st.Token != math.MaxInt64 {
		t.Errorf("Inspect after the refused grants = %+v, %v; want free with the last token %d", st, err, int64(math.MaxInt64))
	}
}

// consecutive tells whether toks are first, first+1, ...
func consecutive(toks []backend.Token, first uint64) bool {
	for i, tok := range toks {
		if uint64(tok) != first+uint64(i) {
			return false
		}
	}
	return len(toks) > 0
}

// The lock expires on the server's clock: every grant measures it against
// ours (a server on this host agrees), for lockrun's skew warning.
func TestGrantsMeasureTheServersClock(t *testing.T) {
	srv := redistest.Start(t)
	b, c := open(t, srv.URL()), open(t, srv.URL())
	o := opts("h", time.Minute)
	l := backendtest.MustAcquire(t, b, "k", o)
	backendtest.WantNoSkew(t, "grant", l)
	backendtest.WantNoSkew(t, "retried grant", backendtest.MustAcquire(t, b, "k", o))
	got := make(chan backend.Lease, 1)
	go func() {
		w := opts("w", time.Minute)
		w.Wait = true
		l, err := c.Acquire(t.Context(), "k", w)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(20 * time.Millisecond)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if w := <-got; w != nil {
		backendtest.WantNoSkew(t, "waiter's grant", w)
	}
}
