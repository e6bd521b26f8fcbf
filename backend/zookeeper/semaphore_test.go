package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/zktest"
)

func semOpts(holder string, limit int, wait bool) backend.AcquireOptions {
	o := opts(holder, wait)
	o.Limit = limit
	return o
}

func TestNodeLimitIsInTheName(t *testing.T) {
	for _, c := range []struct {
		name string
		want int
	}{
		{nodeName("RUN1", 3) + "0000000007", 3},
		{nodeName("RUN1", 1000) + "0000000007", 1000},
		{nodeName("RUN1", 1) + "0000000007", 1},
		{nodeName("RUN1", 0) + "0000000007", 1},
		{nodeName("a-n3", 1) + "0000000007", 1},                        // a run id that looks like a limit
		{"_c_0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-lock-0000000001", 1}, // Curator's mutex
		{"0f1e2d3c4b5a69788796a5b4c3d2e1f0__lock__0000000001", 1},      // kazoo's Lock
		{"_c_RUN-n-lock-0000000001", 1},
		{"_c_RUN-nx-lock-0000000001", 1},
		{"_c_RUN-n1-lock-0000000001", 1},
	} {
		if got := nodeLimit(c.name); got != c.want {
			t.Errorf("nodeLimit(%q) = %d, want %d", c.name, got, c.want)
		}
	}
	if got := nodeRun(nodeName("a-b.c", 2) + "0000000001"); got != "a_b.c" {
		t.Errorf("nodeRun = %q, want a_b.c", got)
	}
}

// TestLimitsRacingNeverMix: contenders of three limits on one key, all
// waiting, start together and come back after each refusal. Whoever is
// inside at any moment shares one limit and is no more than it allows,
// and every token is above those of the leases released before it asked.
func TestLimitsRacingNeverMix(t *testing.T) {
	srv := zktest.Start(t)
	key := backendtest.Key(t)
	var mu sync.Mutex
	inside := map[int]int{}
	granted, refused := map[int]int{}, 0
	var done backend.Token // the highest token of a lease released so far
	deadline := time.Now().Add(8 * time.Second)
	var wg sync.WaitGroup
	for i, limit := range []int{1, 1, 2, 2, 2, 3, 3, 3, 3} {
		b := openTest(t, srv.URL())
		wg.Go(func() {
			for n := 0; n < 6 && time.Now().Before(deadline); {
				mu.Lock()
				floor := done
				mu.Unlock()
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				l, err := b.Acquire(ctx, key, semOpts(fmt.Sprint("c", i), limit, true))
				cancel()
				var le *backend.LimitError
				if errors.As(err, &le) {
					mu.Lock()
					refused++
					mu.Unlock()
					time.Sleep(time.Duration(i) * 3 * time.Millisecond)
					continue
				} else if err != nil {
					t.Errorf("contender %d (limit %d): %v", i, limit, err)
					return
				}
				mu.Lock()
				for other, k := range inside {
					if other != limit && k > 0 {
						t.Errorf("a holder of limit %d got in beside %d of limit %d", limit, k, other)
					}
				}
				if l.Token() <= floor {
					t.Errorf("token %d granted after token %d was released", l.Token(), floor)
				}
				inside[limit]++
				if inside[limit] > limit {
					t.Errorf("%d holders inside a semaphore of limit %d", inside[limit], limit)
				}
				granted[limit]++
				mu.Unlock()
				time.Sleep(15 * time.Millisecond)
				mu.Lock()
				inside[limit]--
				mu.Unlock()
				if err := l.Release(t.Context()); err != nil {
					t.Errorf("contender %d release: %v", i, err)
				}
				mu.Lock()
				done = max(done, l.Token())
				mu.Unlock()
				n++
			}
		})
	}
	wg.Wait()
	t.Logf("grants by limit %v, %d refusals", granted, refused)
	if len(granted) < 2 || refused == 0 {
		t.Errorf("grants by limit %v, %d refusals: the limits never raced", granted, refused)
	}
}

// TestReleaseOutOfOrderWakesTheFirstWaiter: holders leave in any order,
// not in the queue's, and each time the longest waiter takes the slot at
// once, not when the holder ahead of it in the queue leaves.
func TestReleaseOutOfOrderWakesTheFirstWaiter(t *testing.T) {
	srv := zktest.Start(t)
	key := backendtest.Key(t)
	const limit = 2
	var held []backend.Lease
	for i := range limit {
		held = append(held, backendtest.MustAcquire(t, openTest(t, srv.URL()), key, semOpts(fmt.Sprint("h", i), limit, false)))
	}
	got := make(chan int, 2)
	for i := range 2 {
		b := openTest(t, srv.URL())
		go func() {
			l, err := b.Acquire(t.Context(), key, semOpts(fmt.Sprint("w", i), limit, true))
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				got <- -1
				return
			}
			got <- i
			<-t.Context().Done()
			_ = l.Release(context.Background())
		}()
		time.Sleep(time.Second)
	}
	for w, h := range []int{1, 0} { // the newer holder first
		if err := held[h].Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		select {
		case i := <-got:
			if i != w {
				t.Fatalf("the slot went to waiter %d, want %d", i, w)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("waiter %d did not get the slot of holder %d", w, h)
		}
	}
}

// TestWaiterThatGivesUpLeavesTheQueue: a waiter whose ctx ends takes its
// node with it, and the waiter behind it takes the next slot at once.
func TestWaiterThatGivesUpLeavesTheQueue(t *testing.T) {
	srv := zktest.Start(t)
	key := backendtest.Key(t)
	h0 := backendtest.MustAcquire(t, openTest(t, srv.URL()), key, semOpts("h0", 2, false))
	h1 := backendtest.MustAcquire(t, openTest(t, srv.URL()), key, semOpts("h1", 2, false))
	ctx, cancel := context.WithCancel(t.Context())
	quit := make(chan error, 1)
	quitter, patient := openTest(t, srv.URL()), openTest(t, srv.URL())
	go func() {
		_, err := quitter.Acquire(ctx, key, semOpts("quitter", 2, true))
		quit <- err
	}()
	time.Sleep(time.Second)
	got := make(chan backend.Lease, 1)
	go func() {
		l, err := patient.Acquire(t.Context(), key, semOpts("patient", 2, true))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(time.Second)
	cancel()
	if err := <-quit; !errors.Is(err, context.Canceled) {
		t.Errorf("the quitter's Acquire = %v, want context.Canceled", err)
	}
	if err := h0.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l == nil {
			return
		}
		st, err := openTest(t, srv.URL()).Inspect(t.Context(), key)
		if err != nil || len(st.Holders) != 2 || st.Holders[0].Token != h1.Token() || st.Holders[1].Token != l.Token() {
			t.Errorf("Inspect = %+v, %v; want h1 and the patient waiter", st, err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the waiter behind one that gave up did not get the freed slot")
	}
}

// TestCrashedWaiterIsPassedOver: a waiter killed while first in line holds
// up no slot for longer than its session: the one behind it takes the
// freed slot once the dead one's session expires.
func TestCrashedWaiterIsPassedOver(t *testing.T) {
	p := &proxied{srv: zktest.Start(t), by: map[*Backend]*netproxy.Proxy{}}
	key := backendtest.Key(t)
	// Only the dead waiter's session is short: a loaded host that stalls
	// a live client for its 1.25 s would expire h1 too (seen in CI).
	live := func(holder string, wait bool) backend.AcquireOptions {
		o := semOpts(holder, 2, wait)
		o.TTL = 10 * time.Second
		return o
	}
	h0 := backendtest.MustAcquire(t, p.open(t), key, live("h0", false))
	h1 := backendtest.MustAcquire(t, p.open(t), key, live("h1", false))
	dead := p.open(t).(*Backend)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _, _ = dead.Acquire(ctx, key, semOpts("dead", 2, true)) }()
	time.Sleep(time.Second)
	got := make(chan backend.Lease, 1)
	next := p.open(t)
	go func() {
		l, err := next.Acquire(t.Context(), key, live("next", true))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(time.Second)
	p.mu.Lock()
	p.by[dead].Hold(netproxy.Both)
	p.mu.Unlock()
	crashed := time.Now()
	if err := h0.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l == nil {
			return
		}
		if d := time.Since(crashed); d > 3*time.Second { // a session of 1.25 s, and slack for the load
			t.Errorf("the slot came %v after the waiter ahead died; its session was %v", d, 1250*time.Millisecond)
		}
		st, err := openTest(t, p.srv.URL()).Inspect(t.Context(), key)
		if err != nil || len(st.Holders) != 2 || st.Holders[0].Token != h1.Token() || st.Holders[1].Token != l.Token() {
			t.Errorf("Inspect = %+v, %v; want h1 and the waiter behind the dead one", st, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a dead waiter held up the freed slot")
	}
}

// TestRetriedAcquireTakesNoSecondSlot: a run that asks again (its first
// reply lost) gets no second slot while its first node lives.
func TestRetriedAcquireTakesNoSecondSlot(t *testing.T) {
	srv := zktest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	o := semOpts("alice", 3, false)
	first := backendtest.MustAcquire(t, b, key, o)
	if again, err := b.Acquire(t.Context(), key, o); !errors.Is(err, backend.ErrHeld) {
		if again != nil {
			_ = again.Release(t.Context())
		}
		t.Fatalf("retried Acquire = %v, want ErrHeld", err)
	}
	if st, err := b.Inspect(t.Context(), key); err != nil || len(st.Holders) != 1 {
		t.Errorf("Inspect after a retry = %+v, %v; want one holder", st, err)
	}
	_ = first.Release(t.Context())
}

// TestOlderLayoutsReadAsAPlainLock: a holder's node and a record written
// by a lockrun from before semaphores, and another client's mutex, are a
// plain lock to a semaphore; a plain grant's record keeps its old bytes.
func TestOlderLayoutsReadAsAPlainLock(t *testing.T) {
	srv := zktest.Start(t)
	b, raw := openTest(t, srv.URL()), rawConn(t, srv.Addr())
	acl := zk.WorldACL(zk.PermAll)
	admin, err := b.adminSession(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	wantLimitError := func(key string) {
		t.Helper()
		for _, wait := range []bool{false, true} {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			l, err := b.Acquire(ctx, key, semOpts("sem", 2, wait))
			cancel()
			var le *backend.LimitError
			if !errors.As(err, &le) || le.Have != 1 || le.Want != 2 {
				t.Errorf("semaphore Acquire (wait %v) = %v; want a *LimitError, have 1, want 2", wait, err)
			}
			if l != nil {
				_ = l.Release(t.Context())
			}
		}
	}
	for _, node := range []struct{ name, data string }{
		{"_c_OLDRUN-lock-", `{"holder":"old","run_id":"OLDRUN","info":{},"token":1764590000000000,"since_us":1764590000000000}`},
		{"_c_0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-lock-", "10.0.0.7"},
		{"0f1e2d3c4b5a69788796a5b4c3d2e1f0__lock__", ""},
	} {
		key := backendtest.Key(t)
		if err := b.ensure(t.Context(), admin, b.lockPath(key)); err != nil {
			t.Fatal(err)
		}
		p, err := raw.Create(b.lockPath(key)+"/"+node.name, []byte(node.data), zk.FlagEphemeralSequential, acl)
		if err != nil {
			t.Fatal(err)
		}
		wantLimitError(key)
		if st, err := b.Inspect(t.Context(), key); err != nil || !st.Held || st.Limit != 0 || st.Holders != nil {
			t.Errorf("Inspect beside %s = %+v, %v; want a held plain lock", node.name, st, err)
		}
		_ = raw.Delete(p, -1)
	}
	// An older lockrun's min-hold record.
	key := backendtest.Key(t)
	if err := b.ensure(t.Context(), admin, b.stateDir()); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Minute).UnixMicro()
	old := fmt.Sprintf(`{"token":1764590000000000,"hold_until_us":%d,"holder":"old","run_id":"OLDRUN","info":{},"since_us":1764590000000000}`, until)
	if _, err := raw.Create(b.statePath(key), []byte(old), 0, acl); err != nil {
		t.Fatal(err)
	}
	wantLimitError(key)
	if st, err := b.Inspect(t.Context(), key); err != nil || st.Holder != "old" || st.Limit != 0 {
		t.Errorf("Inspect of an older min-hold = %+v, %v; want held by old", st, err)
	}
	if err := b.ForceRelease(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	l := backendtest.MustAcquire(t, b, key, opts("plain", false))
	data, _, err := raw.Get(b.statePath(key))
	if want := fmt.Sprintf(`{"token":%d,"info":{}}`, l.Token()); err != nil || string(data) != want {
		t.Errorf("a plain grant's record = %s, %v; want %s", data, err, want)
	}
	_ = l.Release(t.Context())
}

// TestSemaphoreHolderKeepsNoCheckpoint: checkpoints are a plain lock's;
// a semaphore holder's token, the oldest's too, stores nothing.
func TestSemaphoreHolderKeepsNoCheckpoint(t *testing.T) {
	srv := zktest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, semOpts("sem", 2, false))
	if err := b.SetCheckpoint(t.Context(), key, l.Token(), []byte("step 3")); !errors.Is(err, backend.ErrLost) {
		t.Errorf("SetCheckpoint with a semaphore holder's token = %v, want ErrLost", err)
	}
	if _, ok, err := b.GetCheckpoint(t.Context(), key); ok || err != nil {
		t.Errorf("GetCheckpoint = %v, %v; want none stored", ok, err)
	}
	_ = l.Release(t.Context())
}

// TestMinHoldsKeepSlotsAcrossGrants: slots kept for a min-hold survive
// other holders' grants and releases, each written at the version read,
// and ReleaseHolder ends one of them by its token.
func TestMinHoldsKeepSlotsAcrossGrants(t *testing.T) {
	srv := zktest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	var kept []backend.Lease
	for i := range 2 {
		o := semOpts(fmt.Sprint("cron", i), 3, false)
		o.MinHold = time.Minute
		kept = append(kept, backendtest.MustAcquire(t, b, key, o))
	}
	other := backendtest.MustAcquire(t, b, key, semOpts("other", 3, false))
	for _, l := range kept {
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	third := backendtest.MustAcquire(t, b, key, semOpts("third", 3, false))
	if _, err := b.Acquire(t.Context(), key, semOpts("fourth", 3, false)); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("Acquire with two slots kept and one held = %v, want ErrHeld", err)
	}
	if _, err := b.Acquire(t.Context(), key, opts("plain", false)); !errors.Is(err, backend.ErrLimitMismatch) {
		t.Errorf("plain Acquire beside a semaphore's min-holds = %v, want ErrLimitMismatch", err)
	}
	st, err := b.Inspect(t.Context(), key)
	if err != nil || st.Limit != 3 || len(st.Holders) != 3 || st.Holders[0].Token != kept[0].Token() || st.Holders[2].Token != third.Token() || st.Holders[0].TTL <= 0 {
		t.Fatalf("Inspect = %+v, %v; want the two kept slots, with time left, and third", st, err)
	}
	if err := b.ReleaseHolder(t.Context(), key, kept[1].Token()); err != nil {
		t.Fatal(err)
	}
	fourth := backendtest.MustAcquire(t, b, key, semOpts("fourth", 3, false))
	if fourth.Token() <= third.Token() {
		t.Errorf("token %d after %d", fourth.Token(), third.Token())
	}
	if err := b.ReleaseHolder(t.Context(), key, kept[1].Token()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("ReleaseHolder of an ended hold = %v, want ErrLost", err)
	}
	_ = third.Release(t.Context())
	_ = fourth.Release(t.Context())
}

// TestReleaseHolderOfTokenZeroBreaksNobody: another client's holder (a
// Curator mutex's node) has no token; a token of 0 names no holder.
func TestReleaseHolderOfTokenZeroBreaksNobody(t *testing.T) {
	srv := zktest.Start(t)
	b, raw, key := openTest(t, srv.URL()), rawConn(t, srv.Addr()), backendtest.Key(t)
	admin, err := b.adminSession(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ensure(t.Context(), admin, b.lockPath(key)); err != nil {
		t.Fatal(err)
	}
	p, err := raw.Create(b.lockPath(key)+"/_c_0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-lock-", []byte("10.0.0.7"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.ReleaseHolder(t.Context(), key, 0); !errors.Is(err, backend.ErrLost) {
		t.Errorf("ReleaseHolder(0) = %v, want ErrLost", err)
	}
	if ok, _, err := raw.Exists(p); err != nil || !ok {
		t.Errorf("the Curator holder's node after ReleaseHolder(0): exists %v, %v", ok, err)
	}
}

// TestSemaphoreOutlivesAServerRestart: holders and a waiter keep their
// sessions and nodes across a restart of the server (with its data), the
// waiter's watch is set again on the new connection, and the next slot
// and token follow.
func TestSemaphoreOutlivesAServerRestart(t *testing.T) {
	srv := zktest.Start(t)
	key := backendtest.Key(t)
	long := func(holder string, wait bool) backend.AcquireOptions {
		o := semOpts(holder, 2, wait)
		o.TTL = 10 * time.Second // outlives the restart and the client's redial, on a loaded host too
		return o
	}
	var held []backend.Lease
	for i := range 2 {
		held = append(held, backendtest.MustAcquire(t, openTest(t, srv.URL()), key, long(fmt.Sprint("h", i), false)))
	}
	got := make(chan backend.Lease, 1)
	w := openTest(t, srv.URL())
	go func() {
		l, err := w.Acquire(t.Context(), key, long("w", true))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(time.Second)
	srv.Restart()
	renewed := func(l backend.Lease) error {
		ctx, cancel := context.WithTimeout(t.Context(), 8*time.Second)
		defer cancel()
		for {
			err := l.Renew(ctx)
			if err == nil || errors.Is(err, backend.ErrLost) || ctx.Err() != nil {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for i, l := range held {
		if err := renewed(l); err != nil {
			t.Fatalf("holder %d's Renew after the restart: %v", i, err)
		}
	}
	select {
	case l := <-got:
		t.Fatalf("the waiter got a slot while both were held: %v", l)
	default:
	}
	if err := held[1].Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l == nil {
			return
		}
		if l.Token() <= held[1].Token() {
			t.Errorf("token %d after %d", l.Token(), held[1].Token())
		}
		_ = l.Release(t.Context())
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not get the slot released after the restart")
	}
	_ = held[0].Release(t.Context())
}
