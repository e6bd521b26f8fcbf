package redlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/redistest"
)

// bareMajority grants alice "k" on the first two of three fresh masters:
// between the peek and the grant another run's grant (one that no
// majority gave) took the third, which refuses alice's. It returns the
// masters, the backend, the lease and a client of the third master,
// whose foreign lock the caller frees.
func bareMajority(t *testing.T) ([]*redistest.Server, *Backend, *lease, *goredis.Client) {
	t.Helper()
	srv := masters(t, 3)
	b := open(t, urlOf(srv))
	spare := srv[2].Client(t)
	o := opts("alice", 2*time.Second)
	o.Info.Command = "backfill --day 2026-12-01"
	info, _ := json.Marshal(o.Info)
	r := &request{key: "k", names: b.names("k"), o: o, px: millis(o.TTL) + millis(drift(o.TTL)), info: string(info)}
	if err := spare.Set(t.Context(), r.names.lock, "1 run-mallory mallory", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	token := backend.Token(start.UnixMicro())
	value := token.String() + " " + o.RunID + " " + o.Holder
	a, err := b.granted(r, value, token, start, b.grant(t.Context(), r, value, token), func() {})
	if err != nil || a.lease == nil {
		t.Fatalf("grant on two of three masters: %+v, %v", a, err)
	}
	if v := spare.Get(t.Context(), r.names.lock).Val(); v == value {
		t.Fatal("the third master granted the lock over another run's")
	}
	l := a.lease.(*lease)
	if !l.refused[b.masters[2]] || len(l.refused) != 1 {
		t.Fatalf("the lease heard refusals from %v, want the third master's alone", l.refused)
	}
	return srv, b, l, spare
}

// renewOn runs l's renewal script on master i, as Renew does, and returns
// its reply.
func renewOn(t *testing.T, l *lease, i int) int64 {
	t.Helper()
	m := l.b.masters[i]
	take := map[bool]string{true: "1", false: "0"}[l.refused[m]]
	keys := append(l.names.endedKeys(l.names.lock, l.names.record), l.names.sem[0])
	n, err := l.renewOn(t.Context(), m, keys, take)
	if err != nil {
		t.Fatalf("renew.lua: %v", err)
	}
	return n
}

// A lease granted by a bare majority takes the spare master back at its
// next renewal once the other run gave it back, so that one master
// failing afterwards does not cost it the lock (the fault harness's
// redlock-1of3 blackhole lost lockruns so); also when a later acquire
// raised the counter there, or was granted there alone and gave it back.
func TestRenewTakesBackAFreedMaster(t *testing.T) {
	for _, c := range []struct {
		name  string
		since func(ctx context.Context, spare *goredis.Client, n names, later string)
	}{
		{"freed", func(context.Context, *goredis.Client, names, string) {}},
		{"freed-during-the-round", func(ctx context.Context, spare *goredis.Client, n names, _ string) {
			spare.Set(ctx, n.lock, "1 run-mallory mallory", time.Minute)
			time.AfterFunc(200*time.Millisecond, func() { spare.Del(context.Background(), n.lock) })
		}},
		{"counter-raised", func(ctx context.Context, spare *goredis.Client, n names, later string) {
			spare.Set(ctx, n.counter, later, 0) // a grant refused there
		}},
		{"forced-long-before", func(ctx context.Context, spare *goredis.Client, n names, _ string) {
			spare.Set(ctx, n.endFloor, "1 "+fmt.Sprint(refusedAt(ctx, spare, n)-time.Hour.Milliseconds()), 0)
		}},
		{"higher-grant-given-back", func(ctx context.Context, spare *goredis.Client, n names, later string) {
			spare.Set(ctx, n.counter, later, 0) // granted there, no majority: given back
			spare.ZAdd(ctx, n.ended, goredis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: later})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, b, l, spare := bareMajority(t)
			n := b.names("k")
			spare.Del(t.Context(), n.lock, n.record)
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

// A lease never takes back a master whose grant it got (a master that
// lost the lease's copy there), one whose refusal it did not hear before
// its grant was decided, one that lost its record of the refusal (as
// when restarted empty), nor one where its grant ended: released,
// released by token, or broken. Each script's own write is what refuses
// the take.
func TestRenewDoesNotTakeBackWhereItMayNot(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		master int   // whose reply to the renewal is checked
		want   int64 // 0: another's or not the client's to take; 3: free but not to be taken
		end    func(t *testing.T, b *Backend, l *lease, spare *goredis.Client)
	}{
		{"granted-there", 1, 0, func(t *testing.T, b *Backend, l *lease, spare *goredis.Client) {
			b.masters[1].client.Del(ctx, l.names.lock)
		}},
		{"refusal-not-heard", 2, 0, func(t *testing.T, b *Backend, l *lease, spare *goredis.Client) {
			l.refused = map[*master]bool{}
		}},
		{"refusal-forgotten", 2, 3, func(t *testing.T, b *Backend, l *lease, spare *goredis.Client) {
			spare.Del(ctx, l.names.refused)
		}},
		{"released", 2, 3, func(t *testing.T, b *Backend, l *lease, spare *goredis.Client) {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}},
		{"released-by-token", 2, 3, func(t *testing.T, b *Backend, l *lease, spare *goredis.Client) {
			if err := b.ReleaseHolder(ctx, "k", l.Token()); err != nil {
				t.Fatal(err)
			}
		}},
		{"broken", 2, 3, func(t *testing.T, b *Backend, l *lease, spare *goredis.Client) {
			if err := b.ForceRelease(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}},
		{"broken-during-the-grant-round", 2, 3, func(t *testing.T, b *Backend, l *lease, spare *goredis.Client) {
			// A force that reached this master just before the refusal,
			// while its counter was still below the token.
			spare.Set(ctx, l.names.endFloor, "1 "+fmt.Sprint(refusedAt(ctx, spare, l.names)-10), 0)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, b, l, spare := bareMajority(t)
			spare.Del(ctx, l.names.lock) // the other run gives its grant back
			c.end(t, b, l, spare)
			if n := renewOn(t, l, c.master); n != c.want {
				t.Errorf("renew.lua on master %d = %d, want %d (not taken)", c.master, n, c.want)
			}
			if v := b.masters[c.master].client.Get(ctx, l.names.lock).Val(); v != "" {
				t.Errorf("master %d holds %q, want it free", c.master, v)
			}
		})
	}
}

// While the refusing master is still another's, a renewal asks it again
// only as long as that can decide the round: it stops at once when a
// master that granted the lease lost it there (ErrLost, promptly), and
// after an acquire round's time when another master fails (ErrUnavailable,
// so that the heartbeat tries again, asking that master too).
func TestRenewTakeBackGivesUp(t *testing.T) {
	for _, c := range []struct {
		name    string
		fault   func(srv []*redistest.Server, b *Backend, l *lease)
		want    error
		atMost  time.Duration
		comment string
	}{
		{"granted-master-lost-it", func(srv []*redistest.Server, b *Backend, l *lease) {
			srv[0].Freeze()
			b.masters[1].client.Del(context.Background(), l.names.lock)
		}, backend.ErrLost, 300 * time.Millisecond, "one master frozen, one lost the lease"},
		{"granted-master-down", func(srv []*redistest.Server, b *Backend, l *lease) {
			srv[1].Stop()
		}, backend.ErrUnavailable, time.Second, "one master down, the refusing one still another's"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, b, l, _ := bareMajority(t)
			c.fault(srv, b, l)
			defer srv[0].Thaw()
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			begin := time.Now()
			err := l.Renew(ctx)
			if took := time.Since(begin); !errors.Is(err, c.want) || took > c.atMost {
				t.Errorf("Renew with %s = %v after %v, want %v within %v", c.comment, err, took, c.want, c.atMost)
			}
		})
	}
}

// A release records its grant as ended for as long as a refusal of it
// counts, so that no renewal that lands late takes a master back for it.
func TestAReleaseEndsTheGrantForAsLongAsItsRefusal(t *testing.T) {
	_, _, l, spare := bareMajority(t)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	refused := spare.ZScore(t.Context(), l.names.refused, l.Token().String()).Val()
	ended := spare.ZScore(t.Context(), l.names.ended, l.Token().String()).Val()
	if ended < refused {
		t.Errorf("the third master counts the grant ended until %v, refused until %v", ended, refused)
	}
}

// refusedAt is when (ms, the master's clock) spare refused the grant
// of bareMajority.
func refusedAt(ctx context.Context, spare *goredis.Client, n names) int64 {
	zs := spare.ZRangeWithScores(ctx, n.refused, 0, 0).Val()
	if len(zs) == 0 {
		return 0
	}
	px := millis(2*time.Second) + millis(drift(2*time.Second))
	return int64(zs[0].Score) - 2*px
}

// A revoke that missed a master where the holder keeps the lock is not
// undone by the holder taking a free master: the revoke recorded the
// grant as ended on every master it reached.
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
			partial := open(t, "redlock://"+deadAddr(t)+","+srv[1].Addr()+","+srv[2].Addr()+"/0?"+redistest.NoRestartWait)
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
