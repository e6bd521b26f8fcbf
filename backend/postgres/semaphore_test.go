package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
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
func TestSemaphoreReleaseWakesOnlyTheFrontWaiter(t *testing.T) { noHerd(t, 3) }

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
	front := stuckFront(t, b, "k", time.Minute)
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
	time.Sleep(time.Second) // queued behind the stuck front
	release(t, held[0])     // the NOTIFY reaches no one listening
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
