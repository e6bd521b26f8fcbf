package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
	"github.com/lockrun/lockrun/internal/netproxy"
)

func opts(holder string, wait bool) backend.AcquireOptions {
	return backend.AcquireOptions{TTL: time.Second, Holder: holder, RunID: "run-" + holder, Wait: wait}
}

// entries are key's queue, holder first.
func entries(t testing.TB, c *clientv3.Client, key string) []string {
	t.Helper()
	return etcdtest.Entries(t, c, DefaultPrefix+key+"/")
}

// waitQueued waits until key's queue has n entries.
func waitQueued(t testing.TB, c *clientv3.Client, key string, n int) {
	t.Helper()
	etcdtest.WaitQueued(t, c, DefaultPrefix+key+"/", n)
}

func TestTokenIsInTheEntryAndTheCounter(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	var last backend.Token
	for i := range 3 {
		l := backendtest.MustAcquire(t, b, key, opts("a", i%2 == 0))
		resp, err := c.Get(t.Context(), DefaultPrefix+key+"/", clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 || entryToken(resp.Kvs[0]) != l.Token() || l.Token() <= last {
			t.Fatalf("acquisition %d: token %d after %d; etcd holds %v, %v", i, l.Token(), last, resp.Kvs, err)
		}
		if got := counterValue(t, c, key); got != formatToken(l.Token()) {
			t.Fatalf("acquisition %d: token %d, counter %q", i, l.Token(), got)
		}
		last = l.Token()
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := b.Inspect(t.Context(), key); err != nil || st.Held || st.Token != last {
		t.Errorf("Inspect of the released key = %+v, %v; want free with last token %d", st, err, last)
	}
	if n := entries(t, c, key); len(n) != 0 {
		t.Errorf("entries left after release: %v", n)
	}
}

func TestWaitersAreServedInArrivalOrder(t *testing.T) {
	srv := etcdtest.Start(t)
	c, key := srv.Client(t), backendtest.Key(t)
	holder := backendtest.MustAcquire(t, openTest(t, srv.URL()), key, opts("h", false))
	order := make(chan string, 3)
	for i, name := range []string{"first", "second", "third"} {
		b := openTest(t, srv.URL())
		go func() {
			l, err := b.Acquire(t.Context(), key, opts(name, true))
			if err != nil {
				t.Errorf("%s: %v", name, err)
				order <- "error"
				return
			}
			order <- name
			time.Sleep(20 * time.Millisecond) // a later waiter would have its chance to jump in
			l.Release(context.Background())
		}()
		waitQueued(t, c, key, i+2)
	}
	holder.Release(t.Context())
	for _, want := range []string{"first", "second", "third"} {
		if got := <-order; got != want {
			t.Fatalf("got %s, want %s next", got, want)
		}
	}
}

func TestQueuedWaiterKeepsItsPlaceAndStartsAfresh(t *testing.T) {
	srv := etcdtest.Start(t)
	c, key := srv.Client(t), backendtest.Key(t)
	holder := backendtest.MustAcquire(t, openTest(t, srv.URL()), key, opts("h", false))
	got := make(chan backend.Lease, 1)
	go func() {
		l, err := openTest(t, srv.URL()).Acquire(t.Context(), key, opts("w", true))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitQueued(t, c, key, 2)
	queued := entries(t, c, key)[1]
	// The holder renews as lockrun would; the waiter's lease would have
	// expired three times over without the backend renewing it.
	for range 6 {
		time.Sleep(500 * time.Millisecond)
		if err := holder.Renew(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	released := time.Now()
	holder.Release(t.Context())
	w := <-got
	if w == nil {
		return
	}
	defer w.Release(context.Background())
	resp, err := c.Get(t.Context(), queued)
	if err != nil || len(resp.Kvs) != 1 || entryToken(resp.Kvs[0]) != w.Token() {
		t.Errorf("the waiter holds with token %d, not with the entry it queued (%v, %v)", w.Token(), resp.Kvs, err)
	}
	if w.Start().Before(released) {
		t.Errorf("the new holder's Start is %v before the release: its deadline would count from an old renewal", released.Sub(w.Start()))
	}
}

func TestWaiterThatGivesUpLeavesNoEntry(t *testing.T) {
	srv := etcdtest.Start(t)
	c, key := srv.Client(t), backendtest.Key(t)
	holder := backendtest.MustAcquire(t, openTest(t, srv.URL()), key, opts("h", false))
	defer holder.Release(context.Background())
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := openTest(t, srv.URL()).Acquire(ctx, key, opts("w", true))
		done <- err
	}()
	waitQueued(t, c, key, 2)
	giveUp := fmt.Errorf("operator gave up")
	cancel(giveUp)
	if err := <-done; err == nil || !errors.Is(err, giveUp) {
		t.Fatalf("abandoned wait returned %v, want an error wrapping the context's cause", err)
	}
	if n := entries(t, c, key); len(n) != 1 {
		t.Errorf("queue right after the waiter gave up: %v, want the holder's entry alone", n)
	}
}

// At a waiter's turn the queue is read as it was at the revision the
// watch saw the entry ahead deleted at; a revision the member cannot serve
// (not reached yet, or compacted) falls back to the linearizable read.
func TestPredecessorAtTheDeletionsRevision(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	ctx := t.Context()
	del := func(name string) int64 {
		t.Helper()
		resp, err := c.Delete(ctx, name)
		if err != nil || resp.Deleted != 1 {
			t.Fatalf("deleting %s: %v, %v", name, resp, err)
		}
		return resp.Header.Revision
	}
	want := func(rev int64, e *entry, wantPrev *entry) {
		t.Helper()
		prev, prevRev, err := b.predecessorAt(ctx, e, rev)
		if wantPrev == nil && (err != nil || prev != "") || wantPrev != nil && (err != nil || prev != wantPrev.name || prevRev != wantPrev.rev) {
			t.Fatalf("at revision %d: predecessor %q (%d), %v; want %v", rev, prev, prevRev, err, wantPrev)
		}
	}
	h, w1, w2 := queueEntry(t, b, key, "h"), queueEntry(t, b, key, "w1"), queueEntry(t, b, key, "w2")
	gaveUp := del(w1.name) // w1 leaves while h holds
	want(gaveUp, w2, h)
	want(gaveUp-1, w2, w1)
	want(gaveUp+100, w2, h) // in the future: read now
	released := del(h.name)
	want(released, w2, nil)
	if _, err := c.Compact(ctx, released); err != nil {
		t.Fatal(err)
	}
	want(gaveUp-1, w2, nil) // compacted: read now, not w1
	gone := del(w2.name)
	if _, _, err := b.predecessorAt(ctx, w2, gone); !errors.Is(err, errEvicted) {
		t.Fatalf("own entry gone at revision %d: %v, want errEvicted", gone, err)
	}
}

// A waiter whose TTL restarted within StartWithin of its turn counts its
// lease from that restart, and sends no keep-alive at the turn; with
// StartWithin 0 the turn restarts the TTL, after the release.
func TestTurnSoonAfterARestartSendsNoKeepAlive(t *testing.T) {
	for _, within := range []time.Duration{time.Minute, 0} {
		o := opts("w", true)
		o.StartWithin = within
		asked := time.Now()
		_, _, l, released := turnAfterWait(t, o)
		start := l.Start()
		if within > 0 && !(start.After(asked) && start.Before(released)) {
			t.Errorf("StartWithin %v: lease starts %v after the ask, the release came %v after it; want the grant's send time",
				within, start.Sub(asked), released.Sub(asked))
		}
		if within == 0 && start.Before(released) {
			t.Errorf("StartWithin 0: lease starts %v before the release; want the turn's keep-alive", released.Sub(start))
		}
	}
}

// keepQueued notes a renewal as the waiting lease's last restart only once
// it succeeded, and at its send time: an answer that comes late counts
// from before the request went out, and a renewal that fails is no
// restart at all.
func TestKeepQueuedNotesRenewalsThatSucceededAtTheirSendTime(t *testing.T) {
	srv := etcdtest.Start(t)
	p := netproxy.Start(t, srv.Addr())
	b := openTest(t, "etcd://"+p.Addr()+"?request_timeout=150ms")
	e, err := b.grant(t.Context(), backendtest.Key(t), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	last := &restart{at: e.start, ttl: e.ttl}
	ctx, stop := context.WithCancelCause(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.keepQueued(ctx, &e, last, stop)
	}()
	defer func() { stop(nil); <-done }()

	const late = 100 * time.Millisecond
	p.SetLatency(netproxy.Down, late)
	var at, seen time.Time
	for deadline := time.Now().Add(5 * e.ttl); ; time.Sleep(time.Millisecond) {
		if at, _ = last.get(); !at.Equal(e.start) {
			seen = time.Now()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no renewal noted")
		}
	}
	if seen.Sub(at) < late {
		t.Errorf("a renewal answered %v late was noted %v before it was seen: want its send time", late, seen.Sub(at))
	}
	p.SetLatency(netproxy.Down, 0)

	p.Hold(netproxy.Up) // the next renewal gets no answer within its timeout
	time.Sleep(50 * time.Millisecond)
	before, _ := last.get()
	time.Sleep(e.ttl/3 + 300*time.Millisecond)
	if now, _ := last.get(); !now.Equal(before) {
		t.Errorf("a renewal that failed was noted as a restart (%v after the last)", now.Sub(before))
	}
	p.Heal()
	if ctx.Err() != nil {
		t.Fatalf("the wait ended: %v", context.Cause(ctx))
	}
}
