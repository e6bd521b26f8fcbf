package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

// A runner's retry with the same RunID, after a first try whose reply was
// lost (its lease is simply not used here), takes the lock over: same
// entry and token, and a TTL restarted by a request sent after Start, so
// that no one else gets the lock before Start+TTL.
func TestRetryWithTheSameRunIDTakesOverItsEntry(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	o := opts("a", false)
	o.TTL = 2 * time.Second
	lost := backendtest.MustAcquire(t, b, key, o)
	time.Sleep(time.Second)
	begin := time.Now()
	l, err := b.Acquire(t.Context(), key, o)
	if err != nil {
		t.Fatalf("retry with the same RunID = %v, want the lock", err)
	}
	if l.Token() != lost.Token() || l.Start().Before(begin) || l.TTL() < o.TTL {
		t.Errorf("retry: token %d (first try %d), Start %v after the retry began, TTL %v; want the same token, a later Start, TTL >= %v",
			l.Token(), lost.Token(), l.Start().Sub(begin), l.TTL(), o.TTL)
	}
	if q := entries(t, c, key); len(q) != 1 {
		t.Errorf("queue after the retry = %v, want the first try's entry alone", q)
	}
	// Nobody renews now: another run gets the lock when the restarted TTL
	// ends, never before the retry's deadline.
	w := opts("b", true)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	other, err := openTest(t, srv.URL()).Acquire(ctx, key, w)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(t.Context())
	if early := time.Until(l.Start().Add(l.TTL() * 99 / 100)); early > 0 {
		t.Errorf("another run got the lock %v before the retry's deadline", early)
	}
}

// A waiting retry takes over its own earlier entry at once, instead of
// queueing behind it until its lease expires.
func TestWaitingRetryTakesOverItsEntry(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	o := opts("a", false)
	lost := backendtest.MustAcquire(t, b, key, o)
	o.Wait = true
	begin := time.Now()
	l, err := b.Acquire(t.Context(), key, o)
	if err != nil || l.Token() != lost.Token() || time.Since(begin) > 500*time.Millisecond {
		t.Fatalf("waiting retry = %v after %v; want the first try's lock (token %d) at once", err, time.Since(begin), lost.Token())
	}
	if q := entries(t, c, key); len(q) != 1 {
		t.Errorf("queue after the retry = %v, want the first try's entry alone", q)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// reclaim gives up, for the caller to queue afresh, on an entry that went
// away and on a lease shorter than the retry asks (which it revokes).
func TestReclaimRefusesAGoneOrShortLease(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	for name, tc := range map[string]struct {
		release bool
		ttl     time.Duration
	}{
		"released":  {release: true, ttl: time.Second},
		"too short": {ttl: 5 * time.Second},
	} {
		l := backendtest.MustAcquire(t, b, key, opts("a", false))
		resp, err := c.Get(t.Context(), DefaultPrefix+key+"/", clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("%s: queue = %v, %v", name, resp, err)
		}
		if tc.release {
			l.Release(t.Context())
		}
		if _, err := b.reclaim(t.Context(), key, resp.Kvs[0], 1, tc.ttl); !errors.Is(err, errEvicted) {
			t.Errorf("%s: reclaim = %v, want errEvicted", name, err)
		}
		if q := entries(t, c, key); len(q) != 0 {
			t.Errorf("%s: queue after reclaim = %v, want it empty", name, q)
		}
	}
}

// A semaphore's retry takes over its earlier try's slot when that slot is
// not the oldest, a waiter queued behind it or not: it keeps its token and
// hands nothing to the waiter.
func TestSemaphoreRetryTakesOverASlotNotTheOldest(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	backendtest.MustAcquire(t, b, key, semOpts("h", 2, false))
	o := semOpts("a", 2, false)
	o.TTL = 30 * time.Second
	lost := backendtest.MustAcquire(t, b, key, o)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go openTest(t, srv.URL()).Acquire(ctx, key, semOpts("w", 2, true))
	waitQueued(t, c, key, 3)
	if l, err := b.Acquire(t.Context(), key, o); err != nil || l.Token() != lost.Token() {
		t.Fatalf("the retry = %v, %v; want the earlier try's slot, token %d; queue %v", l, err, lost.Token(), entries(t, c, key))
	}
}
