package redlock

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// bareMajority grants alice "k" on three fresh masters, then puts another
// run's grant in its place on the third, as when that run's grant landed
// there first: alice's lease is held by a bare majority. It returns the
// masters, the backend, the lease and a client of the third master,
// whose foreign lock the caller frees.
func bareMajority(t *testing.T) ([]*redistest.Server, *Backend, *lease, *goredis.Client) {
	t.Helper()
	srv := masters(t, 3)
	b := open(t, urlOf(srv))
	o := opts("alice", 2*time.Second)
	o.Info.Command = "backfill --day 2026-12-01"
	l := backendtest.MustAcquire(t, b, "k", o).(*lease)
	spare := srv[2].Client(t)
	if err := spare.Set(t.Context(), b.names("k").lock, "1 run-mallory mallory", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	return srv, b, l, spare
}

// A lease granted by a bare majority takes the spare master back at its
// next renewal once that master is free, so that one master failing
// afterwards does not cost it the lock: also when a later acquire raised
// the counter there, or was granted there alone and gave it back (the
// fault harness's redlock-1of3 blackhole lost lockruns so).
func TestRenewTakesBackAFreedMaster(t *testing.T) {
	for _, c := range []struct {
		name  string
		since func(ctx context.Context, spare *goredis.Client, n names, later string)
	}{
		{"freed", func(context.Context, *goredis.Client, names, string) {}},
		{"counter-raised", func(ctx context.Context, spare *goredis.Client, n names, later string) {
			spare.Set(ctx, n.counter, later, 0) // a grant refused there
		}},
		{"higher-grant-given-back", func(ctx context.Context, spare *goredis.Client, n names, later string) {
			spare.Set(ctx, n.counter, later, 0) // granted there, no majority: released
			spare.ZAdd(ctx, n.ended, goredis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: later})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, b, l, spare := bareMajority(t)
			n := b.names("k")
			spare.Del(t.Context(), n.lock)
			c.since(t.Context(), spare, n, (l.Token() + 1000).String())
			srv[0].Freeze()
			defer srv[0].Thaw()
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if err := l.Renew(ctx); err != nil {
				t.Fatalf("Renew with the first master frozen and the third freed = %v, want nil", err)
			}
			if v := spare.Get(t.Context(), n.lock).Val(); v != l.value {
				t.Errorf("the third master holds %q, want the lease's %q", v, l.value)
			}
			if info := spare.HGet(t.Context(), n.record, "info").Val(); !strings.Contains(info, "backfill") {
				t.Errorf("the third master's holder record has info %q, want alice's", info)
			}
		})
	}
}

// A lease does not take back a master where its own grant ended (its
// release reached it, say, before a late renewal did), nor one that its
// grant round never reached.
func TestRenewDoesNotTakeBackWhereItEnded(t *testing.T) {
	for _, c := range []struct {
		name  string
		since func(ctx context.Context, spare *goredis.Client, n names, token string)
	}{
		{"released-there", func(ctx context.Context, spare *goredis.Client, n names, token string) {
			spare.ZAdd(ctx, n.ended, goredis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: token})
		}},
		{"broken-there", func(ctx context.Context, spare *goredis.Client, n names, token string) {
			spare.Set(ctx, n.endFloor, token, 0)
		}},
		{"never-reached", func(ctx context.Context, spare *goredis.Client, n names, _ string) {
			spare.Set(ctx, n.counter, "1", 0)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, b, l, spare := bareMajority(t)
			n := b.names("k")
			spare.Del(t.Context(), n.lock)
			c.since(t.Context(), spare, n, l.Token().String())
			srv[0].Freeze()
			defer srv[0].Thaw()
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			if err := l.Renew(ctx); !errors.Is(err, backend.ErrUnavailable) {
				t.Errorf("Renew = %v, want ErrUnavailable (one master ours, one not, one frozen)", err)
			}
			if v := spare.Get(t.Context(), n.lock).Val(); v != "" {
				t.Errorf("the third master holds %q, want it free", v)
			}
		})
	}
}

// A revoke that missed a master where the holder keeps the lock is not
// undone by the holder taking a free master: the revoke raised the token
// counter on every master it reached.
func TestRenewDoesNotUndoARevoke(t *testing.T) {
	for _, c := range []struct {
		name  string
		token func(*lease) backend.Token
	}{
		{"holder", func(l *lease) backend.Token { return l.Token() }},
		{"every-holder", func(*lease) backend.Token { return 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, b, l, spare := bareMajority(t)
			// The revoke reaches the second and third masters only.
			partial := open(t, "redlock://"+deadAddr(t)+","+srv[1].Addr()+","+srv[2].Addr()+"/0")
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			if err := partial.Revoke(ctx, "k", c.token(l)); err != nil {
				t.Fatalf("Revoke on two of three masters: %v", err)
			}
			spare.Del(t.Context(), b.names("k").lock) // the other run gives its grant back
			if err := l.Renew(ctx); !errors.Is(err, backend.ErrLost) {
				t.Errorf("Renew after the revoke = %v, want ErrLost", err)
			}
			if v := spare.Get(t.Context(), b.names("k").lock).Val(); v != "" {
				t.Errorf("the third master holds %q after the revoke, want it free", v)
			}
		})
	}
}

// deadAddr is a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
