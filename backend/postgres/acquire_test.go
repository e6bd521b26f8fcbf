package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// The runner retries an Acquire whose reply was lost with the same run id.
// The retry's lease counts from the retry's send time, so the server must
// restart the lease there too: no other client may get the lock before
// the retry's Start()+TTL·0.99, the runner's local deadline.
func TestRetriedAcquireRestartsTheLease(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b, other := open(t, raw), open(t, raw)
	o := opts("a")
	l1, err := b.Acquire(t.Context(), "k", o)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	l2, err := b.Acquire(t.Context(), "k", o)
	if err != nil {
		t.Fatalf("retried Acquire: %v", err)
	}
	if l2.Token() != l1.Token() {
		t.Errorf("retried Acquire changed the token from %d to %d", l1.Token(), l2.Token())
	}
	deadline := l2.Start().Add(l2.TTL() * 99 / 100)
	for time.Now().Before(deadline) {
		l, err := other.Acquire(t.Context(), "k", opts("b"))
		if err == nil {
			t.Fatalf("another run got the lock %v before the retry's local deadline", deadline.Sub(l.Start()))
		}
		if !errors.Is(err, backend.ErrHeld) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The lease may have expired by now: the loop ran to its local
	// deadline, and a last try that was slow ran past the server's.
	if err := l2.Release(t.Context()); err != nil && !errors.Is(err, backend.ErrLost) {
		t.Errorf("Release of the retried lease: %v", err)
	}
}

// A lease of the same run that has expired is a new grant: it gets a new
// token, since another run may have held the key in between.
func TestSameRunAfterExpiryGetsANewToken(t *testing.T) {
	b := open(t, pgtest.Isolated(t, pgtest.Shared()))
	o := opts("a")
	o.TTL = 50 * time.Millisecond
	l1, err := b.Acquire(t.Context(), "k", o)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	l2, err := b.Acquire(t.Context(), "k", o)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token() <= l1.Token() {
		t.Errorf("token %d after the expired lease's %d", l2.Token(), l1.Token())
	}
}

// An Acquire that reads this run's own row (live: a retry; or expired)
// while another run takes the key in a concurrent transaction must see
// the other run as the holder: a row it only read is no lease.
func TestOwnRowTakenMeanwhileIsNoLease(t *testing.T) {
	for _, ttl := range []time.Duration{50 * time.Millisecond, 10 * time.Second} {
		b := open(t, pgtest.Isolated(t, pgtest.Shared()))
		o := opts("a")
		o.TTL = ttl
		if _, err := b.Acquire(t.Context(), "k", o); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // the short lease expires
		committed := takeOver(t, b, "k", "b", 200*time.Millisecond)
		l, err := b.Acquire(t.Context(), "k", o) // waits for the row
		<-committed
		var held *backend.HeldError
		if !errors.As(err, &held) || held.Status.RunID != "b" {
			t.Errorf("ttl %v: Acquire while run b takes the key = %v, %v; want held by run b", ttl, l, err)
		}
	}
}

// takeOver gives key to run in a transaction of its own that it commits
// after delay, and returns a channel closed once it has.
func takeOver(t *testing.T, b *Backend, key, run string, delay time.Duration) <-chan struct{} {
	t.Helper()
	c, err := pgx.ConnectConfig(t.Context(), b.conns.cfg)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := c.Begin(t.Context())
	if err == nil {
		_, err = tx.Exec(t.Context(), "UPDATE "+b.Table()+
			" SET run_id = $2, token = token + 1, expires_at = now() + interval '10 s' WHERE key = $1", key, run)
	}
	if err != nil {
		c.Close(t.Context())
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(delay)
		if err := tx.Commit(context.Background()); err != nil {
			t.Error(err)
		}
		c.Close(context.Background())
	}()
	return done
}
