package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

func semOpts(holder string, limit int, wait bool) backend.AcquireOptions {
	o := opts(holder, wait)
	o.Limit = limit
	return o
}

// A slot freed by any holder goes to the waiter at once, not only one
// freed by the holder N places ahead of it: the holders here outlive the
// test, so only a release can free a slot.
func TestSemaphoreWaiterWakesOnAnyHoldersRelease(t *testing.T) {
	const limit = 3
	srv := etcdtest.Start(t)
	c, key := srv.Client(t), backendtest.Key(t)
	var held []backend.Lease
	for i := range limit {
		o := semOpts(fmt.Sprint("h", i), limit, false)
		o.TTL = 30 * time.Second
		held = append(held, backendtest.MustAcquire(t, openTest(t, srv.URL()), key, o))
	}
	got := make(chan backend.Lease, 1)
	go func() {
		l, err := openTest(t, srv.URL()).Acquire(t.Context(), key, semOpts("w", limit, true))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	waitQueued(t, c, key, limit+1)
	for _, i := range []int{2, 1} { // the newest holders, not the oldest
		released := time.Now()
		if err := held[i].Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			break // the waiter holds a slot already: nobody waits for this one
		}
		select {
		case w := <-got:
			if d := time.Since(released); d > 500*time.Millisecond {
				t.Errorf("the waiter got the slot %v after the release", d)
			}
			if w != nil {
				defer w.Release(context.Background())
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter never got the slot of a holder that was not the oldest")
		}
	}
	held[0].Release(t.Context())
}

// Two Acquires of another limit racing for a free key: the transaction
// that queues each checks the other's entries, so exactly one wins and
// the other gets a *LimitError, waiting or not.
func TestSemaphoreLimitsRacingForAFreeKey(t *testing.T) {
	srv := etcdtest.Start(t)
	a, b := openTest(t, srv.URL()), openTest(t, srv.URL())
	for round := range 20 {
		key, wait := backendtest.Key(t), round%2 == 1
		var wg sync.WaitGroup
		start := make(chan struct{})
		res := make([]error, 2)
		leases := make([]backend.Lease, 2)
		for i, be := range []*Backend{a, b} {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				<-start
				leases[i], res[i] = be.Acquire(ctx, key, semOpts(fmt.Sprint("r", i), 1+i, wait))
			})
		}
		close(start)
		wg.Wait()
		var le *backend.LimitError
		won := 0
		for i, err := range res {
			switch {
			case err == nil:
				won++
				leases[i].Release(t.Context())
			case !errors.As(err, &le) || le.Have != 2-i || le.Want != 1+i:
				t.Errorf("round %d (wait %v): limit %d's Acquire = %v; want the lock or a *LimitError (have %d)", round, wait, 1+i, err, 2-i)
			}
		}
		if won != 1 {
			t.Fatalf("round %d (wait %v): %d of the two limits got the key (%v)", round, wait, won, res)
		}
	}
}

// The entries of a semaphore carry its limit in their names and their
// tokens in the counter, as a plain lock's do; an entry of the older
// layout (or etcdctl lock's) is a plain lock to a semaphore.
func TestSemaphoreLayoutAndOlderEntries(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, semOpts("s", 3, false))
	q := entries(t, c, key)
	if want := fmt.Sprintf("%s%s/limit-0003/%x", DefaultPrefix, key, int64(l.(*lease).e.id)); len(q) != 1 || q[0] != want {
		t.Errorf("queue = %v, want [%s]", q, want)
	}
	if got := counterValue(t, c, key); got != formatToken(l.Token()) {
		t.Errorf("token %d, counter %q", l.Token(), got)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	// An older lockrun's holder: an entry named by its lease, an empty
	// counter.
	g, err := c.Grant(t.Context(), 30)
	if err != nil {
		t.Fatal(err)
	}
	old := fmt.Sprintf("%s%s/%x", DefaultPrefix, key, int64(g.ID))
	if _, err := c.Put(t.Context(), old, `{"holder":"old-host","run_id":"r1"}`, clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	var le *backend.LimitError
	if _, err := b.Acquire(t.Context(), key, semOpts("s", 2, true)); !errors.As(err, &le) || le.Have != 1 || le.Want != 2 {
		t.Errorf("semaphore Acquire beside an older lockrun's holder = %v, want a *LimitError (have 1, want 2)", err)
	}
	st, err := b.Inspect(t.Context(), key)
	if err != nil || !st.Held || st.Holder != "old-host" || st.Limit != 0 || st.Holders != nil {
		t.Errorf("Inspect of an older lockrun's holder = %+v, %v; want a plain lock held by old-host", st, err)
	}
	if err := b.ReleaseHolder(t.Context(), key, st.Token); err != nil {
		t.Errorf("ReleaseHolder of the older holder: %v", err)
	}
	if q := entries(t, c, key); len(q) != 0 {
		t.Errorf("queue after ReleaseHolder = %v", q)
	}
}

// A plain waiter queued behind a plain holder makes a semaphore's Acquire
// fail at once: waiters' limits count too.
func TestSemaphoreRefusedBehindAPlainWaiter(t *testing.T) {
	srv := etcdtest.Start(t)
	c, key := srv.Client(t), backendtest.Key(t)
	holder := backendtest.MustAcquire(t, openTest(t, srv.URL()), key, opts("h", false))
	defer holder.Release(context.Background())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go openTest(t, srv.URL()).Acquire(ctx, key, opts("w", true))
	waitQueued(t, c, key, 2)
	holder.Release(t.Context()) // the waiter holds now, with a plain lock
	waitQueued(t, c, key, 1)
	ctx2, cancel2 := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel2()
	var le *backend.LimitError
	if _, err := openTest(t, srv.URL()).Acquire(ctx2, key, semOpts("s", 2, true)); !errors.As(err, &le) || ctx2.Err() != nil {
		t.Errorf("semaphore Acquire behind a plain holder = %v, want a *LimitError at once", err)
	}
}

// A semaphore's waiter that gives up leaves the queue at once, and the
// next waiter takes the freed slot in its place.
func TestSemaphoreWaiterThatGivesUpLeavesNoEntry(t *testing.T) {
	const limit = 2
	srv := etcdtest.Start(t)
	c, key := srv.Client(t), backendtest.Key(t)
	var held []backend.Lease
	for i := range limit {
		o := semOpts(fmt.Sprint("h", i), limit, false)
		o.TTL = 30 * time.Second
		held = append(held, backendtest.MustAcquire(t, openTest(t, srv.URL()), key, o))
	}
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := openTest(t, srv.URL()).Acquire(ctx, key, semOpts("quitter", limit, true))
		gaveUp <- err
	}()
	waitQueued(t, c, key, limit+1)
	got := make(chan backend.Lease, 1)
	go func() {
		l, err := openTest(t, srv.URL()).Acquire(t.Context(), key, semOpts("next", limit, true))
		if err != nil {
			t.Errorf("second waiter: %v", err)
		}
		got <- l
	}()
	waitQueued(t, c, key, limit+2)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("abandoned wait = %v, want context.Canceled", err)
	}
	waitQueued(t, c, key, limit+1)
	held[0].Release(t.Context())
	if l := <-got; l != nil {
		if !entryHolds(t, c, key, l, limit) {
			t.Error("the second waiter returned without holding a slot")
		}
		l.Release(t.Context())
	}
	held[1].Release(t.Context())
}

// entryHolds tells whether l's entry is among key's limit oldest.
func entryHolds(t *testing.T, c *clientv3.Client, key string, l backend.Lease, limit int) bool {
	q := entries(t, c, key)
	for i, name := range q {
		if name == l.(*lease).e.name {
			return i < limit
		}
	}
	return false
}

// A semaphore's holder has no checkpoint: its token is refused, even when
// its entry is the oldest.
func TestSemaphoreHolderCannotCheckpoint(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, semOpts("s", 2, false))
	defer l.Release(context.Background())
	if err := b.SetCheckpoint(t.Context(), key, l.Token(), []byte("x")); !errors.Is(err, backend.ErrLost) {
		t.Errorf("SetCheckpoint with a semaphore holder's token = %v, want ErrLost", err)
	}
	if _, ok, err := b.GetCheckpoint(t.Context(), key); ok || err != nil {
		t.Errorf("GetCheckpoint after the refusal = %v, %v; want none", ok, err)
	}
}

// The requests each operation sends, counted in etcd's own metrics: the
// plain lock's acquire, renew and release are what they were before
// semaphores (a grant and one transaction; a keep-alive and a read), its
// release an owner-checked delete, the write that wakes the next in line,
// with no read before it, then a revoke in the background; a semaphore's
// cost the same. The
// renewal's read is a read-only transaction since Revoke (the entry and
// its revocation marker), and the release's delete reads the marker too.
func TestRequestsPerOperation(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	for _, limit := range []int{1, 3} {
		before := requests(t, srv.Addr())
		l := backendtest.MustAcquire(t, b, key, semOpts("a", limit, false))
		acquired := requests(t, srv.Addr())
		if err := l.Renew(t.Context()); err != nil {
			t.Fatal(err)
		}
		renewed := requests(t, srv.Addr())
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		b.revoking.Wait() // the revoke follows in the background
		released := requests(t, srv.Addr())
		for _, c := range []struct {
			op       string
			from, to map[string]int
			want     string
		}{
			{"acquire", before, acquired, "LeaseGrant=1 Txn=1"},
			{"renew", acquired, renewed, "LeaseKeepAlive=1 Txn=1"},
			{"release", renewed, released, "LeaseRevoke=1 Txn=1"},
		} {
			if got := diff(c.from, c.to); got != c.want {
				t.Errorf("limit %d: %s sent %s, want %s", limit, c.op, got, c.want)
			}
		}
	}
}

// requests counts the unary requests etcd has handled, and the keep-alive
// messages it has received, by method.
func requests(t *testing.T, addr string) map[string]int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for line := range strings.Lines(string(body)) {
		unary := strings.HasPrefix(line, "grpc_server_handled_total{") && strings.Contains(line, `grpc_type="unary"`)
		keepAlive := strings.HasPrefix(line, "grpc_server_msg_received_total{") && strings.Contains(line, `grpc_method="LeaseKeepAlive"`)
		if !unary && !keepAlive {
			continue
		}
		_, method, _ := strings.Cut(line, `grpc_method="`)
		method, _, _ = strings.Cut(method, `"`)
		v, err := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]), 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		n[method] += int(v)
	}
	return n
}

// diff is what changed from a to b, as "Method=N" sorted by method.
func diff(a, b map[string]int) string {
	var out []string
	for m, v := range b {
		if d := v - a[m]; d != 0 {
			out = append(out, fmt.Sprintf("%s=%d", m, d))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// Slots freed at once go to as many waiters at once: the first waiter
// wakes on the release, and each one that gets a slot wakes the next.
func TestSemaphoreFreedSlotsGoToTheWaitersInLine(t *testing.T) {
	const limit = 3
	srv := etcdtest.Start(t)
	c, key := srv.Client(t), backendtest.Key(t)
	var held []backend.Lease
	for i := range limit {
		o := semOpts(fmt.Sprint("h", i), limit, false)
		o.TTL = 30 * time.Second
		held = append(held, backendtest.MustAcquire(t, openTest(t, srv.URL()), key, o))
	}
	got := make(chan string, 2*limit)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // the waiters beyond the limit give up, the others release
	for i := range 2 * limit {
		be := openTest(t, srv.URL())
		wg.Go(func() {
			o := semOpts(fmt.Sprint("w", i), limit, true)
			o.TTL = 30 * time.Second // only a release frees a slot
			l, err := be.Acquire(ctx, key, o)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("waiter %d: %v", i, err)
				}
				return
			}
			got <- o.Holder
			<-ctx.Done()
			l.Release(context.Background())
		})
		waitQueued(t, c, key, limit+i+1)
	}
	released := time.Now()
	for _, i := range []int{1, 2, 0} {
		if err := held[i].Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for want := range limit {
		select {
		case w := <-got:
			if w != fmt.Sprint("w", want) {
				t.Errorf("slot %d went to %s, want w%d", want, w, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d freed slots taken 5s after the releases", want, limit)
		}
	}
	if d := time.Since(released); d > time.Second {
		t.Errorf("the %d freed slots were taken %v after the releases", limit, d)
	}
	select {
	case w := <-got:
		t.Errorf("%s got a slot beyond the limit", w)
	case <-time.After(300 * time.Millisecond):
	}
}

// A waiter killed in the queue leaves an entry that nobody renews: it
// takes a freed slot it never uses, and delays the waiter behind it,
// until its lease expires, within its TTL, as a plain lock's does.
func TestSemaphoreCrashedWaiterGoesWithItsLease(t *testing.T) {
	const limit = 2
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	var held []backend.Lease
	for i := range limit {
		o := semOpts(fmt.Sprint("h", i), limit, false)
		o.TTL = 30 * time.Second
		held = append(held, backendtest.MustAcquire(t, openTest(t, srv.URL()), key, o))
	}
	// The killed waiter: queued as Acquire queues, then never renewed.
	dead, err := b.grant(t.Context(), key, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.semEnqueue(t.Context(), &dead, semOpts("dead", limit, true)); err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		o := semOpts("next", limit, true)
		o.TTL = 30 * time.Second
		l, err := openTest(t, srv.URL()).Acquire(t.Context(), key, o)
		if err != nil {
			t.Errorf("waiter behind the dead one: %v", err)
		}
		got <- time.Now()
		if l != nil && l.Token() <= dead.token {
			t.Errorf("token %d after the dead waiter's %d", l.Token(), dead.token)
		}
	}()
	waitQueued(t, c, key, limit+2)
	for _, h := range held {
		if err := h.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	released := time.Now()
	select {
	case at := <-got:
		if d := at.Sub(released); d > dead.ttl+time.Second {
			t.Errorf("the waiter behind a dead one got a slot %v after the releases; its lease was %v", d, dead.ttl)
		}
	case <-time.After(dead.ttl + 5*time.Second):
		t.Fatal("the waiter behind a dead one never got a slot")
	}
	// With both slots free the next waiter may get one at once, beside the
	// dead entry: that one goes when its lease ends.
	for deadline := time.Now().Add(dead.ttl + 5*time.Second); ; time.Sleep(50 * time.Millisecond) {
		q := entries(t, c, key)
		if len(q) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue once the dead waiter's lease ended = %v, want the new holder alone", q)
		}
	}
}

// An etcd restart (leases and entries kept in its data) leaves the
// holders their slots and the waiter its place: the waiter's watch comes
// back, and a release after the restart still wakes it.
func TestSemaphoreWaiterSurvivesARestart(t *testing.T) {
	const limit = 2
	srv := etcdtest.Start(t)
	c, key := srv.Client(t), backendtest.Key(t)
	var held []backend.Lease
	for i := range limit {
		o := semOpts(fmt.Sprint("h", i), limit, false)
		o.TTL = 30 * time.Second
		held = append(held, backendtest.MustAcquire(t, openTest(t, srv.URL()), key, o))
	}
	got := make(chan backend.Lease, 1)
	go func() {
		o := semOpts("w", limit, true)
		o.TTL = 3 * time.Second
		l, err := openTest(t, srv.URL()).Acquire(t.Context(), key, o)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	waitQueued(t, c, key, limit+1)
	srv.Restart()
	time.Sleep(time.Second) // the waiter's client reconnects meanwhile
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := held[1].Release(t.Context())
		if err == nil {
			break
		}
		if !errors.Is(err, backend.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Release after the restart: %v", err)
		}
	}
	released := time.Now()
	select {
	case l := <-got:
		if d := time.Since(released); d > time.Second {
			t.Errorf("the waiter got the slot %v after a release that followed a restart", d)
		}
		if l != nil {
			l.Release(t.Context())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never got the slot released after the restart")
	}
	held[0].Release(t.Context())
}
