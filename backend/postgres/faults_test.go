package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// withinDeadline runs f under a 300 ms deadline and fails the test unless
// it returns ErrUnavailable by then (plus scheduling slack).
func withinDeadline(t *testing.T, what string, f func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	err := f(ctx)
	if took := time.Since(begin); took > 400*time.Millisecond || !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("%s: %v after %v; want ErrUnavailable by the 300ms deadline", what, err, took)
	}
}

// A link that stops forwarding must not hold a call past its deadline:
// pgx gives up at the deadline and cancels the query over a new
// connection in the background, which through a held proxy hangs too.
func TestCallsReturnByTheirDeadlineOnAHeldLink(t *testing.T) {
	base := pgtest.Isolated(t, pgtest.Shared())
	for _, dir := range []netproxy.Direction{netproxy.Up, netproxy.Down, netproxy.Both} {
		proxy := netproxy.Start(t, "127.0.0.1:5432")
		b := open(t, pgtest.WithHost(t, base, proxy.Addr()))
		l, err := b.Acquire(t.Context(), "k", opts("h"))
		if err != nil {
			t.Fatal(err)
		}
		proxy.Hold(dir)
		withinDeadline(t, "Renew", l.Renew)
		withinDeadline(t, "Inspect", func(ctx context.Context) error { _, err := b.Inspect(ctx, "k"); return err })
		withinDeadline(t, "Release", l.Release)
		begin := time.Now()
		b.Close()
		if took := time.Since(begin); took > 100*time.Millisecond {
			t.Errorf("Close took %v on a held link", took)
		}
		proxy.Heal()
		open(t, base).ForceRelease(t.Context(), "k")
	}
}

func TestPrivateServerFreezeThawRestart(t *testing.T) {
	srv := pgtest.Start(t)
	b := open(t, srv.URL())
	l, err := b.Acquire(t.Context(), "k", opts("h"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	withinDeadline(t, "Renew of a frozen server", l.Renew)
	srv.Thaw()
	if err := l.Renew(t.Context()); err != nil {
		t.Fatalf("Renew after thaw: %v", err)
	}
	srv.Restart()
	for err = l.Renew(t.Context()); errors.Is(err, backend.ErrUnavailable); err = l.Renew(t.Context()) {
		// the first call after a restart may find its pooled session cut
	}
	if err != nil {
		t.Fatalf("Renew after restart: %v (the table and lease survive a clean restart)", err)
	}
	srv.Stop()
	withinDeadline(t, "Renew of a stopped server", l.Renew)
}

// A semaphore's holders live in its row: a server restart keeps every
// slot, each holder renews afterwards, the limit still holds, and the
// next token is above every one issued before.
func TestSemaphoreSurvivesARestart(t *testing.T) {
	srv := pgtest.Start(t)
	b := open(t, srv.URL())
	var held []backend.Lease
	for _, h := range []string{"a", "b"} {
		l, err := b.Acquire(t.Context(), "k", semOpts(h, 2))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	srv.Restart()
	for _, l := range held {
		err := l.Renew(t.Context())
		for try := 0; try < maxIdle && errors.Is(err, backend.ErrUnavailable); try++ {
			err = l.Renew(t.Context()) // each pooled session the restart cut fails once
		}
		if err != nil {
			t.Fatalf("Renew of holder %d after restart: %v", l.Token(), err)
		}
	}
	if _, err := b.Acquire(t.Context(), "k", semOpts("c", 2)); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("Acquire of the full semaphore after restart = %v, want ErrHeld", err)
	}
	release(t, held[0])
	l, err := b.Acquire(t.Context(), "k", semOpts("c", 2))
	if err != nil || l.Token() <= held[1].Token() {
		t.Fatalf("Acquire after a release = %v, %v; want a token above %d", l, err, held[1].Token())
	}
}
