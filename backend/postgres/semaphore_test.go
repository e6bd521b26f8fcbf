package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/pgtest"
)

func TestSemaphores(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	backendtest.RunSemaphores(t, backendtest.Operators{Harness: backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, raw) },
		TTL:  time.Second,
	}})
}

func semOpts(holder string, limit int) backend.AcquireOptions {
	o := opts(holder)
	o.Limit = limit
	return o
}

// Checkpoints are a plain lock's: the semaphore's row carries its newest
// holder's token, which must not pass the checkpoint's lease check.
func TestSemaphoreHolderCannotCheckpoint(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	l, err := b.Acquire(t.Context(), "k", semOpts("a", 2))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetCheckpoint(t.Context(), "k", l.Token(), []byte("p")); !errors.Is(err, backend.ErrLost) {
		t.Errorf("SetCheckpoint with a semaphore holder's token = %v, want ErrLost", err)
	}
	if _, ok, err := b.GetCheckpoint(t.Context(), "k"); ok || err != nil {
		t.Errorf("GetCheckpoint after the refused write = %v, %v; want none", ok, err)
	}
}

// Plain and semaphore acquirers racing for a free key: the winners all
// asked for one limit, never more than it, and every loser is told why.
func TestLimitsRaceForAFreeKey(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	const n, limit = 12, 3
	clients := make([]*Backend, n)
	for i := range clients {
		clients[i] = open(t, raw)
	}
	for round := range 8 {
		key := fmt.Sprint("k", round)
		var mu sync.Mutex
		won := map[int][]backend.Lease{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, c := range clients {
			want := []int{1, limit}[i%2]
			wg.Go(func() {
				<-start
				l, err := c.Acquire(t.Context(), key, semOpts(fmt.Sprint("h", i), want))
				var held *backend.HeldError
				var mix *backend.LimitError
				switch {
				case err == nil:
					mu.Lock()
					won[want] = append(won[want], l)
					mu.Unlock()
				case errors.As(err, &mix) && mix.Want == want && mix.Have == limit+1-want:
				case errors.As(err, &held):
				default:
					t.Errorf("round %d, limit %d: %v", round, want, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(won) != 1 || len(won[1]) > 1 || len(won[limit]) > limit {
			t.Fatalf("round %d: winners by limit %v; want one limit, within it", round, counts(won))
		}
		for _, ls := range won {
			for _, l := range ls {
				if err := l.Release(t.Context()); err != nil {
					t.Error(err)
				}
			}
		}
	}
}

func counts(m map[int][]backend.Lease) map[int]int {
	c := map[int]int{}
	for k, v := range m {
		c[k] = len(v)
	}
	return c
}

// Many first users of a key at once: the row is inserted once, and
// exactly limit of them get a slot, each with its own token.
func TestSemaphoreFirstUseByMany(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	const n, limit = 16, 3
	var mu sync.Mutex
	tokens := map[backend.Token]bool{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		b := open(t, raw)
		wg.Go(func() {
			<-start
			l, err := b.Acquire(t.Context(), "k", semOpts(fmt.Sprint("h", i), limit))
			if errors.Is(err, backend.ErrHeld) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if tokens[l.Token()] {
				t.Errorf("token %d issued twice", l.Token())
			}
			tokens[l.Token()] = true
		})
	}
	close(start)
	wg.Wait()
	if len(tokens) != limit {
		t.Errorf("%d of %d first users got a slot of a semaphore of %d", len(tokens), n, limit)
	}
}

// The token column is a bigint: a semaphore's grant at its limit fails
// with ErrTokenRange and leaves the holders as they were; a full
// semaphore is still just full.
func TestSemaphoreTokensStopAtTheLimit(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	first, err := b.Acquire(t.Context(), "k", semOpts("a", 2))
	if err != nil {
		t.Fatal(err)
	}
	pgtest.Exec(t, pgtest.Shared(), fmt.Sprintf("UPDATE %s SET token = %d", b.Table(), int64(math.MaxInt64)))
	if l, err := b.Acquire(t.Context(), "k", semOpts("b", 2)); !errors.Is(err, backend.ErrTokenRange) {
		t.Fatalf("Acquire past the limit = %v, %v; want ErrTokenRange", l, err)
	}
	st, err := b.Inspect(t.Context(), "k")
	if err != nil || len(st.Holders) != 1 || st.Token != first.Token() {
		t.Errorf("Inspect after the refused grant = %+v, %v; want the first holder alone", st, err)
	}
	if err := first.Renew(t.Context()); err != nil {
		t.Errorf("the first holder's Renew after the refused grant: %v", err)
	}
}

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

func release(t *testing.T, l backend.Lease) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Every operation on a lease is one statement, a plain lock's as before
// (issue 18 measures them) and a semaphore's alike.
func TestOneStatementPerOperation(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	for _, limit := range []int{1, 3} {
		key := fmt.Sprint("k", limit)
		if _, err := open(t, raw).Acquire(t.Context(), key, opts("warm")); err != nil { // creates the table
			t.Fatal(err)
		}
		b := open(t, raw)
		var n atomic.Int64
		b.conns.cfg.Tracer = counter{&n}
		key += "-counted"
		step := func(what string, f func() error) {
			t.Helper()
			before := n.Load()
			if err := f(); err != nil {
				t.Fatalf("limit %d, %s: %v", limit, what, err)
			}
			if got := n.Load() - before; got != 1 {
				t.Errorf("limit %d: %s sent %d statements, want 1", limit, what, got)
			}
		}
		var l backend.Lease
		step("acquire", func() (err error) { l, err = b.Acquire(t.Context(), key, semOpts("h", limit)); return err })
		step("renew", func() error { return l.Renew(t.Context()) })
		step("release", func() error { return l.Release(t.Context()) })
	}
}

// A semaphore's freed slot wakes the first waiter in line, not every
// waiter, as the plain lock's release does.
func TestSemaphoreReleaseWakesOnlyTheFrontWaiter(t *testing.T) {
	const waiters = 24
	_, stmts := handOff(t, pgtest.Isolated(t, pgtest.Shared()), waiters, 40, 3)
	t.Logf("%.1f statements per hand-off of a semaphore's slot with %d waiters", stmts, waiters)
	if stmts > waiters/2 {
		t.Errorf("%.1f statements per hand-off with %d waiters: they are woken in a herd", stmts, waiters)
	}
}

// A waiter that dies in line (its session ends) leaves the line at once:
// the waiter behind it moves to the front and takes a freed slot without
// waiting for any lease to expire.
func TestCrashedWaiterLeavesTheSemaphoresLine(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	const limit = 2
	held := make([]backend.Lease, limit)
	for i := range held {
		o := semOpts(fmt.Sprint("h", i), limit)
		o.TTL = time.Minute
		l, err := b.Acquire(t.Context(), "k", o)
		if err != nil {
			t.Fatal(err)
		}
		held[i] = l
	}
	front := stuckFront(t, b, "k")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	got := make(chan error, 1)
	var w backend.Lease
	go func() {
		o := semOpts("behind", limit)
		o.Wait = true
		var err error
		w, err = open(t, raw).Acquire(ctx, "k", o)
		got <- err
	}()
	time.Sleep(300 * time.Millisecond) // queued behind the stuck front
	release(t, held[0])                // the NOTIFY reaches no one listening
	select {
	case err := <-got:
		t.Fatalf("the waiter passed a live front waiter: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	crashed := time.Now()
	if err := front.Conn().Close(t.Context()); err != nil { // the session dies
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter behind a crashed one: %v", err)
	}
	if d := time.Since(crashed); d > 5*time.Second {
		t.Errorf("the freed slot went to the waiter %v after the one ahead crashed", d)
	}
	release(t, w)
	release(t, held[1])
}

// Renewals, releases and grants of one semaphore's holders at once each
// rewrite the one row: none may work on a version another has replaced,
// or a released holder would come back, or a grant or renewal be lost.
func TestConcurrentWritesToASemaphoreLoseNothing(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	const limit, n = 30, 10 // n holders renew, n release, n are granted
	b := open(t, raw)
	leases := make([]backend.Lease, 2*n)
	for i := range leases {
		o := semOpts(fmt.Sprint("h", i), limit)
		o.TTL = time.Minute
		l, err := b.Acquire(t.Context(), "k", o)
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	time.Sleep(200 * time.Millisecond)
	renewed := time.Now()
	var wg sync.WaitGroup
	start := make(chan struct{})
	granted := make([]backend.Lease, n)
	for i := range n {
		c := open(t, raw)
		wg.Go(func() {
			<-start
			if err := leases[i].Renew(t.Context()); err != nil {
				t.Errorf("renew %d: %v", i, err)
			}
		})
		wg.Go(func() {
			<-start
			if err := leases[n+i].Release(t.Context()); err != nil {
				t.Errorf("release %d: %v", n+i, err)
			}
		})
		wg.Go(func() {
			<-start
			o := semOpts(fmt.Sprint("new", i), limit)
			o.TTL = time.Minute
			l, err := c.Acquire(t.Context(), "k", o)
			if err != nil {
				t.Errorf("grant %d: %v", i, err)
			}
			granted[i] = l
		})
	}
	close(start)
	wg.Wait()
	want := map[backend.Token]bool{}
	for _, l := range append(leases[:n:n], granted...) {
		if l != nil {
			want[l.Token()] = true
		}
	}
	st, err := b.Inspect(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	renewers := map[backend.Token]bool{}
	for _, l := range leases[:n] {
		renewers[l.Token()] = true
	}
	for _, h := range st.Holders {
		if !want[h.Token] {
			t.Errorf("holder %d (run %s) is live after its release", h.Token, h.RunID)
		}
		delete(want, h.Token)
		if renewers[h.Token] && h.Renewed.Before(renewed.Add(-50*time.Millisecond)) {
			t.Errorf("holder %s's renewal was lost: renewed %v", h.Holder, h.Renewed)
		}
	}
	if len(want) > 0 {
		t.Errorf("%d holders missing after concurrent writes: %v", len(want), want)
	}
}

// Asking for a full semaphore reads its row and locks nothing, as a try
// for a held plain lock does: a crowd of tries is not a convoy, and a
// try does not wait behind the row's writers.
func TestFullSemaphoreIsOnlyRead(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	for i := range 2 {
		if _, err := b.Acquire(t.Context(), "k", semOpts(fmt.Sprint("h", i), 2)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := pgx.ConnectConfig(t.Context(), b.conns.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	tx, err := c.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), "SELECT FROM "+b.Table()+" WHERE key = 'k' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := b.Acquire(ctx, "k", semOpts("late", 2)); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("Acquire of a full semaphore whose row is locked = %v; want ErrHeld at once", err)
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

// An Acquire retried with the same run id (its first reply was lost)
// takes no second slot: it keeps the slot's token and restarts its lease.
func TestRetriedSemaphoreAcquireKeepsOneSlot(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	o := semOpts("a", 2)
	first, err := b.Acquire(t.Context(), "k", o)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // half the lease
	retry, err := b.Acquire(t.Context(), "k", o)
	if err != nil {
		t.Fatalf("retried Acquire: %v", err)
	}
	if retry.Token() != first.Token() {
		t.Errorf("retried Acquire changed the token from %d to %d", first.Token(), retry.Token())
	}
	st, err := b.Inspect(t.Context(), "k")
	if err != nil || len(st.Holders) != 1 {
		t.Fatalf("Inspect after a retried Acquire = %+v, %v; want one holder", st, err)
	}
	if st.TTL < o.TTL-700*time.Millisecond { // unrestarted: 1s left
		t.Errorf("the retried slot has %v left of %v: its lease did not restart", st.TTL, o.TTL)
	}
	other, err := b.Acquire(t.Context(), "k", semOpts("b", 2))
	if err != nil {
		t.Fatalf("the second slot after a retried Acquire: %v", err)
	}
	release(t, other)
	release(t, retry)
}
