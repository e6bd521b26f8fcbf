package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

// queueEntry grants a lease on b and queues an entry under it, as a
// waiter does before it waits.
func queueEntry(t testing.TB, b *Backend, key, holder string) *entry {
	t.Helper()
	e, err := b.grant(t.Context(), key, time.Minute)
	if err == nil {
		_, err = b.enqueue(t.Context(), &e, opts(holder, true), true)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &e
}

// putForeign writes an entry of key's queue that lockrun did not, named
// name (by default its lease id in hex, as etcdctl lock names them), with
// value val, under a lease of its own; it returns the entry's key.
func putForeign(t testing.TB, c *clientv3.Client, key, name, val string) string {
	t.Helper()
	g, err := c.Grant(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if name == "" {
		name = fmt.Sprintf("%x", int64(g.ID))
	}
	name = DefaultPrefix + key + "/" + name
	if _, err := c.Put(t.Context(), name, val, clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	return name
}

// Entries are named in the order they queue, whatever the order their
// leases were granted in: a waiter reads only the entries named before
// its own (see entryTag).
func TestEntriesAreNamedInQueueOrder(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	var granted []entry
	for range 4 {
		e, err := b.grant(t.Context(), key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		granted = append(granted, e)
	}
	for i := len(granted) - 1; i >= 0; i-- { // the last lease granted queues first
		if _, err := b.enqueue(t.Context(), &granted[i], opts(fmt.Sprint(i), true), true); err != nil {
			t.Fatal(err)
		}
	}
	byCreation := entries(t, c, key)
	if len(byCreation) != 4 || !slices.IsSorted(byCreation) {
		t.Fatalf("entries by create revision %q: not in name order", byCreation)
	}
}

// A counter set back by hand (or deleted) while entries queue must not
// let a newcomer's token, and so its name, fall below theirs: the newcomer
// counts on from the last entry's name, and queues behind it.
func TestTokensStayAboveTheQueueWhenTheCounterGoesBack(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	ahead := backend.ClockToken(time.Now().Add(time.Hour))
	setCounter(t, c, key, formatToken(ahead))
	first := queueEntry(t, b, key, "first")
	for _, back := range []func(){
		func() { setCounter(t, c, key, formatToken(1)) },
		func() {
			if _, err := c.Delete(t.Context(), DefaultPrefix+key); err != nil {
				t.Fatal(err)
			}
		},
	} {
		back()
		next := queueEntry(t, b, key, "next")
		if next.token != first.token+1 || next.name <= first.name {
			t.Fatalf("token %d (%s) queued behind %d (%s), want %d", next.token, next.name, first.token, first.name, first.token+1)
		}
		if prev, _, err := b.predecessor(t.Context(), next); err != nil || prev != first.name {
			t.Fatalf("predecessor of the newcomer = %q, %v; want %s", prev, err, first.name)
		}
		b.revoke(t.Context(), next.id)
	}
}

// An entry not named for its token queues by its create revision all the
// same: one written after the holder and before a waiter is ahead of the
// waiter, one written after the waiter is not. That holds for the names
// of etcdctl lock and older builds (the lease id in hex, before
// lockrun's), and for a key named after lockrun's (another deployment's
// prefix nested in this one), beside which a waiter takes its lease's
// name rather than fail.
func TestForeignEntriesQueueByCreation(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client(t)
	for _, tc := range []struct{ name, ahead, behind string }{
		{name: "named by lease"},
		{name: "named after lockrun's", ahead: "zz", behind: "tz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, key := openTest(t, srv.URL()), backendtest.Key(t)
			holder := backendtest.MustAcquire(t, b, key, opts("h", false))
			ahead := putForeign(t, c, key, tc.ahead, "")
			got := make(chan error, 1)
			go func() {
				l, err := openTest(t, srv.URL()).Acquire(t.Context(), key, opts("w", true))
				if err == nil {
					defer l.Release(context.Background())
				}
				got <- err
			}()
			waitQueued(t, c, key, 3)
			putForeign(t, c, key, tc.behind, "") // behind the waiter, whatever its name
			if err := holder.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				t.Fatalf("the waiter returned (%v) while an older entry %s was queued", err, ahead)
			case <-time.After(300 * time.Millisecond):
			}
			if _, err := c.Delete(t.Context(), ahead); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter did not take the lock once the entries ahead of it were gone")
			}
		})
	}
}

// The entry named first is the holder when it is named for its token;
// when it is not (etcdctl lock's, an earlier build's), the holder is read
// by create revision: here the entry named first came after the holder.
func TestHolderBehindAnEntryNamedBeforeIt(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	holder := backendtest.MustAcquire(t, b, key, opts("h", false))
	putForeign(t, c, key, "", "")
	_, err := b.Acquire(t.Context(), key, opts("a", false))
	var held *backend.HeldError
	if !errors.As(err, &held) || held.Status.Holder != "h" || held.Status.Token != holder.Token() {
		t.Fatalf("Acquire beside the holder and a later entry named before it = %v; want held by h, token %d", err, holder.Token())
	}
}

// A key named first and shaped as lockrun's, but written by hand after
// the holder, is not taken for the holder, nor, carrying this run's id,
// a lease and a token that matches its name, for this run's own earlier
// entry to take over (see reclaim).
func TestHandMadeEntryNamedFirst(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client(t)
	for _, tc := range []struct {
		name, value string
		lease       bool
	}{
		{name: "without a lease", value: `{"holder":"fake"}`},
		{name: "as this run's own", value: `{"holder":"a","run_id":"run-a","token":"1"}`, lease: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, key := openTest(t, srv.URL()), backendtest.Key(t)
			h := backendtest.MustAcquire(t, b, key, opts("h", false))
			const name = "t00000000000000000001-1" // token 1, lease 1
			if tc.lease {
				putForeign(t, c, key, name, tc.value)
			} else if _, err := c.Put(t.Context(), DefaultPrefix+key+"/"+name, tc.value); err != nil {
				t.Fatal(err)
			}
			_, err := b.Acquire(t.Context(), key, opts("a", false))
			var held *backend.HeldError
			if !errors.As(err, &held) || held.Status.Holder != "h" || held.Status.Token != h.Token() {
				t.Fatalf("Acquire = %v; want held by h, token %d", err, h.Token())
			}
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			if l, err := b.Acquire(ctx, key, opts("a", true)); err == nil {
				t.Fatalf("a waiting Acquire took the lock (token %d) while h holds it", l.Token())
			}
		})
	}
}

// When the entry named first is not lockrun's, the oldest is read by
// create revision at the queueing transaction's revision; compacted past
// it, the read is made now, and only while the new entry is still there.
func TestOldestReadNowWhenCompacted(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	foreign := putForeign(t, c, key, "", "")
	e := queueEntry(t, b, key, "w")
	first, err := c.Get(t.Context(), foreign)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Put(t.Context(), DefaultPrefix+key+"-other", "") // a revision to compact to
	if err == nil {
		_, err = c.Compact(t.Context(), resp.Header.Revision)
	}
	if err != nil {
		t.Fatal(err)
	}
	oldest, err := b.oldestAt(t.Context(), e, true, first.Kvs[0], e.rev)
	if err != nil || oldest == nil || string(oldest.Key) != foreign {
		t.Fatalf("oldest at a compacted revision = %v, %v; want %s", oldest, err, foreign)
	}
	b.revoke(t.Context(), e.id)
	if _, err := b.oldestAt(t.Context(), e, true, first.Kvs[0], e.rev); !errors.Is(err, errEvicted) {
		t.Fatalf("oldest at a compacted revision, the entry gone = %v; want errEvicted", err)
	}
}
