package zookeeper

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/zktest"
)

// A renewal that the server applied but whose answer never came back in
// time (a slow link, a loaded host) moved the node's version on without
// the client. It is the lease's own write, not another client's: the next
// renewal, and then the release, or the release with a min-hold, still
// own the node, where they used to report the holder revoked and the
// lock lost (so that a command was stopped though its lock was held).
func TestARenewalAnsweredTooLateIsStillOurs(t *testing.T) {
	for _, c := range []struct {
		name    string
		renew   bool // renew once more before the release
		minHold time.Duration
		limit   int
	}{
		{"renew", true, 0, 0}, {"release", false, 0, 0}, {"release-min-hold", false, time.Minute, 0},
		{"semaphore-release-min-hold", false, time.Minute, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := zktest.Start(t)
			px := netproxy.Start(t, srv.Addr())
			b, key := openTest(t, zktest.URL(px.Addr())), backendtest.Key(t)
			o := opts("alice", false)
			o.TTL, o.MinHold, o.Limit = 5*time.Second, c.minHold, c.limit
			l := backendtest.MustAcquire(t, b, key, o)
			px.Hold(netproxy.Down)
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			err := l.Renew(ctx) // reaches the server; its answer is held
			cancel()
			px.Heal()
			if err == nil {
				t.Fatal("a renewal was answered through a held link")
			}
			if c.renew {
				if err := l.Renew(t.Context()); err != nil {
					t.Errorf("the renewal after one answered too late: %v; want nil", err)
				}
			}
			if err := l.Release(t.Context()); err != nil {
				t.Errorf("Release: %v; want nil", err)
			}
			st, err := b.Inspect(t.Context(), key)
			if err != nil || st.Held != (c.minHold > 0) {
				t.Errorf("after the release: %+v, %v; want held only for a min-hold", st, err)
			}
		})
	}
}

// TestAReadThatFailsAfterAnUnansweredRenewalIsNoLoss: after a renewal
// answered too late, the next one is refused for its version and reads
// the node to tell whether the write that moved it on was its own. When
// that read fails too, nothing is known: the renewal fails without
// calling the lock lost, and the one after it adopts its write.
func TestAReadThatFailsAfterAnUnansweredRenewalIsNoLoss(t *testing.T) {
	srv := zktest.Start(t)
	px := netproxy.Start(t, srv.Addr())
	b, key := openTest(t, zktest.URL(px.Addr())), backendtest.Key(t)
	o := opts("alice", false)
	o.TTL = 10 * time.Second // pings 3 s apart: none falls among these requests
	l := backendtest.MustAcquire(t, b, key, o)
	px.Hold(netproxy.Down)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	err := l.Renew(ctx) // applied; its answer is held
	cancel()
	px.Heal()
	if err == nil {
		t.Fatal("a renewal was answered through a held link")
	}
	px.HoldAfter(netproxy.Up, 1) // the next renewal's write goes; the read after its refusal does not
	ctx, cancel = context.WithTimeout(t.Context(), 500*time.Millisecond)
	err = l.Renew(ctx)
	cancel()
	if err == nil || errors.Is(err, backend.ErrLost) || !strings.Contains(err.Error(), "reading the holder's node") {
		t.Fatalf("a renewal whose read of the node failed = %v; want a failure of that read, not a loss", err)
	}
	px.Heal()
	if err := l.Renew(t.Context()); err != nil {
		t.Errorf("the renewal once the link is back: %v; want it to adopt its own write", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Errorf("Release: %v; want nil", err)
	}
}
