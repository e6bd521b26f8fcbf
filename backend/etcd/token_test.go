package etcd

import (
	"errors"
	"math"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

// counterValue is the raw value of key's token counter, "" when missing.
func counterValue(t testing.TB, c *clientv3.Client, key string) string {
	t.Helper()
	resp, err := c.Get(t.Context(), DefaultPrefix+key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// setCounter writes key's token counter by hand.
func setCounter(t testing.TB, c *clientv3.Client, key, value string) {
	t.Helper()
	if _, err := c.Put(t.Context(), DefaultPrefix+key, value); err != nil {
		t.Fatal(err)
	}
}

// grant takes and releases key on b, once without and once with waiting,
// and returns the tokens.
func grants(t *testing.T, b *Backend, key string, n int) []backend.Token {
	t.Helper()
	var toks []backend.Token
	for i := range n {
		l := backendtest.MustAcquire(t, b, key, opts("a", i%2 == 1))
		toks = append(toks, l.Token())
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	return toks
}

// A cluster whose data is wiped starts its revisions again from 1 (the
// issue's 5, 7, then 2): the tokens must still grow.
func TestTokensGrowAcrossAWipe(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	before := grants(t, b, key, 3)
	srv.Wipe()
	after := grants(t, openTest(t, srv.URL()), key, 2)
	after = append(after, grants(t, b, key, 2)...) // the old client, reconnected
	all := append(before, after...)
	for i := 1; i < len(all); i++ {
		if all[i] <= all[i-1] {
			t.Fatalf("tokens %v (a wipe after the first 3) do not strictly increase", all)
		}
	}
}

// The counter decides when it is ahead of the clock (a host with a clock
// ahead of ours issued the last token, or a hand-set counter): tokens
// count on from it exactly, up to math.MaxUint64, and then the grant
// fails with ErrTokenRange (exit 69) instead of repeating or wrapping.
func TestTokensCountOnFromACounterAheadUpToTheLimit(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	ahead := backend.ClockToken(time.Now().Add(time.Hour))
	setCounter(t, c, key, formatToken(ahead))
	if got := grants(t, b, key, 2); got[0] != ahead+1 || got[1] != ahead+2 {
		t.Errorf("tokens after a counter an hour ahead (%d) = %v, want %d, %d", ahead, got, ahead+1, ahead+2)
	}
	setCounter(t, c, key, formatToken(math.MaxUint64-2))
	if got := grants(t, b, key, 2); got[0] != math.MaxUint64-1 || got[1] != math.MaxUint64 {
		t.Errorf("tokens near the limit = %v, want %d, %d", got, uint64(math.MaxUint64-1), uint64(math.MaxUint64))
	}
	for _, wait := range []bool{false, true} {
		l, err := b.Acquire(t.Context(), key, opts("a", wait))
		if !errors.Is(err, backend.ErrTokenRange) || !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Acquire (wait %v) past the last token = %v, %v; want ErrTokenRange", wait, l, err)
		}
	}
	if st, err := b.Inspect(t.Context(), key); err != nil || st.Held || st.Token != math.MaxUint64 {
		t.Errorf("Inspect after the refused grants = %+v, %v; want free with the last token", st, err)
	}
}

// A counter left empty by an earlier lockrun (whose tokens were
// revisions) counts as 0: the next token is on the clock's scale. A
// counter that is not a token stops grants rather than guess.
func TestCounterFromEarlierVersionsAndForeignValues(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	setCounter(t, c, key, "")
	before := backend.ClockToken(time.Now())
	if got := grants(t, b, key, 1); got[0] < before {
		t.Errorf("token after an empty counter = %d, want at least the clock, %d", got[0], before)
	}
	setCounter(t, c, key, "not a token")
	if _, err := b.Acquire(t.Context(), key, opts("a", false)); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Acquire with a foreign counter value = %v, want ErrUnavailable", err)
	}
	if n := entries(t, c, key); len(n) != 0 {
		t.Errorf("entries left after the refused grant: %v", n)
	}
}
