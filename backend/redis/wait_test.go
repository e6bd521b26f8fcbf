package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// commandCalls is how many times the server has run the given commands
// (lower case, e.g. "evalsha"): each call is one round trip of ours.
func commandCalls(t testing.TB, c *goredis.Client, cmds ...string) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range cmds {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
				calls, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				n += calls
			}
		}
	}
	return n
}

// scriptCalls is how many scripts the server has run.
func scriptCalls(t testing.TB, c *goredis.Client) int { return commandCalls(t, c, "evalsha", "eval") }

// queued starts a waiter on key and returns once it is in the queue.
func queued(t *testing.T, b *Backend, c *goredis.Client, ctx context.Context, key, holder string) <-chan backend.Lease {
	t.Helper()
	got := make(chan backend.Lease, 1)
	before := c.ZCard(t.Context(), b.names(key).queue).Val()
	go func() {
		o := opts(holder, time.Minute)
		o.Wait = true
		l, err := b.Acquire(ctx, key, o)
		if err != nil && ctx.Err() == nil {
			t.Errorf("waiter %s: %v", holder, err)
		}
		got <- l
	}()
	for c.ZCard(t.Context(), b.names(key).queue).Val() == before {
		time.Sleep(time.Millisecond)
	}
	return got
}

// A release wakes the first waiter in line, and only it: each hand-off
// costs the release and one acquire, whatever the number of waiters.
func TestReleaseWakesOnlyTheNextWaiterInArrivalOrder(t *testing.T) {
	const n = 5
	srv := redistest.Start(t)
	b, c := open(t, srv.URL()), srv.Client(t)
	holder := backendtest.MustAcquire(t, b, "k", opts("holder", time.Minute))
	warm, _ := b.Acquire(t.Context(), "warm", opts("holder", time.Minute))
	warm.Release(t.Context()) // the server learns the release script: no NOSCRIPT below
	var waiters []<-chan backend.Lease
	for i := range n {
		waiters = append(waiters, queued(t, open(t, srv.URL()), c, t.Context(), "k", fmt.Sprint("w", i)))
	}
	before := scriptCalls(t, c)
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, w := range waiters {
		select {
		case l := <-w:
			if v := c.Get(t.Context(), b.names("k").lock).Val(); !strings.HasSuffix(v, fmt.Sprint(" w", i)) {
				t.Errorf("grant %d went to %q; waiters should be served in arrival order", i, v)
			}
			if err := l.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("waiter %d was not woken", i)
		}
	}
	// n+1 releases and n acquires; waking everyone would cost n(n+1)/2 tries.
	if calls := scriptCalls(t, c) - before; calls != 2*n+1 {
		t.Errorf("%d hand-offs ran %d scripts, want %d", n, calls, 2*n+1)
	}
}

// A waiter that gave up is skipped at once: the next one is woken, not
// left to wait for the holder's lease to run out.
func TestAbandonedWaiterIsSkipped(t *testing.T) {
	srv := redistest.Start(t)
	b, c := open(t, srv.URL()), srv.Client(t)
	holder := backendtest.MustAcquire(t, b, "k", opts("holder", time.Minute))
	quitter, quit := context.WithCancel(t.Context())
	gaveUp := queued(t, open(t, srv.URL()), c, quitter, "k", "quitter")
	next := queued(t, open(t, srv.URL()), c, t.Context(), "k", "next")
	quit()
	<-gaveUp
	begin := time.Now()
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-next:
		l.Release(t.Context())
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter behind an abandoned one was not woken by the release")
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("hand-off past an abandoned waiter took %v", took)
	}
	if pttl := c.PTTL(t.Context(), b.names("k").queue).Val(); pttl == -1 {
		t.Error("the waiters' queue has no expiry: entries of dead waiters would stay forever")
	}
}

// A frozen server makes calls fail by their deadline as unavailable, not
// hang and not report a loss it cannot prove.
func TestFrozenServerFailsCallsByTheirDeadline(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv.URL())
	l := backendtest.MustAcquire(t, b, "k", opts("h", time.Minute))
	srv.Freeze()
	defer srv.Thaw()
	for name, call := range map[string]func(context.Context) error{
		"Renew":   l.Renew,
		"Acquire": func(ctx context.Context) error { _, err := b.Acquire(ctx, "other", opts("x", time.Minute)); return err },
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		begin := time.Now()
		err := call(ctx)
		cancel()
		if took := time.Since(begin); !errors.Is(err, backend.ErrUnavailable) || took > 500*time.Millisecond {
			t.Errorf("%s on a frozen server: %v after %v; want ErrUnavailable by the 200ms deadline", name, err, took)
		}
	}
}

// A server that is down fails OpenURL after a short retry.
func TestServerDownIsUnavailableAtOpen(t *testing.T) {
	port := backendtest.FreePort(t)
	begin := time.Now()
	_, err := tryOpen(fmt.Sprintf("redis://u:hunter2@127.0.0.1:%d/0", port))
	if !errors.Is(err, backend.ErrUnavailable) || time.Since(begin) > time.Second {
		t.Fatalf("OpenURL with the server down: %v after %v; want ErrUnavailable within a second", err, time.Since(begin))
	}
	if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %q should say why, without the password", err)
	}
}
