package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// A front waiter whose process is frozen while its session stays alive
// holds the head of the line and never takes the lock. The waiters behind
// it must not wait for it forever: they get the lock about when the lease
// they saw can have expired.
func TestStuckFrontWaiterDoesNotBlockTheLine(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	holder, err := b.Acquire(t.Context(), "k", opts("holder"))
	if err != nil {
		t.Fatal(err)
	}
	front := stuckFront(t, b, "k")
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = holder.Release(context.Background()) // the NOTIFY reaches no one awake
	}()
	ctx, cancel := context.WithTimeout(t.Context(), holder.TTL()+3*time.Second)
	defer cancel()
	o := opts("behind")
	o.Wait = true
	begin := time.Now()
	l, err := open(t, raw).Acquire(ctx, "k", o)
	if err != nil {
		t.Fatalf("waiter behind a stuck front: %v after %v", err, time.Since(begin))
	}
	if took := time.Since(begin); took > holder.TTL()+time.Second {
		t.Errorf("waiter behind a stuck front got the lock after %v; want about the holder's ttl %v", took, holder.TTL())
	}
	l.Release(t.Context())
	front.Rollback(t.Context())
}

// stuckFront takes the head of key's waiting line in an open transaction
// on a session of its own, and never acts on it.
func stuckFront(t *testing.T, b *Backend, key string) pgx.Tx {
	t.Helper()
	c, err := pgx.ConnectConfig(t.Context(), b.conns.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	tx, err := c.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "SELECT pg_advisory_xact_lock($1)", queueID(b.table, key)); err != nil {
		t.Fatal(err)
	}
	return tx
}

// A release tells whether someone waits in the key's line, so that Close
// waits (see closeDelay) only then: a run that hands the lock on keeps
// its sessions' ends out of the next holder's start, and one that does
// not exits at once.
func TestReleaseTellsWhetherSomeoneWaits(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	for _, waiter := range []bool{false, true} {
		b := open(t, raw)
		l, err := b.Acquire(t.Context(), "k", opts("holder"))
		if err != nil {
			t.Fatal(err)
		}
		var next <-chan backend.Lease
		if waiter {
			next = waitFor(t, open(t, raw), "k", opts("waiter"))
			until(t, "the waiter at the front", func() bool { g, _ := queueOf(t, b, "k"); return g == 1 })
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := b.handedOn.Load(); got != waiter {
			t.Errorf("someone waiting: %v; the release says %v", waiter, got)
		}
		if waiter {
			_ = granted(t, next).Release(t.Context())
		}
	}
}
