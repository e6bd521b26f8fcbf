package etcd

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

// A waiter's grant leaves the mark of when its turn came until its
// command runs: the mark's read and write would share the machine with
// the command's start. Until then status shows when it queued.
func TestWaiterMarksItsTurnOnceStarted(t *testing.T) {
	b, key, l, released := turnAfterWait(t, opts("waiter", true))
	time.Sleep(300 * time.Millisecond) // what a mark sent at the grant would take
	if st := inspect(t, b, key); st.Holder != "waiter" || !st.Since.Before(released) {
		t.Errorf("before Started: holder %q since %v, want the waiter since it queued, before the release at %v", st.Holder, st.Since, released)
	}
	backend.Started(l)
	waitMarked(t, b, key, released)
}

// A caller that runs no command, and so never calls Started, gets the
// mark from the first renewal.
func TestWaiterMarksItsTurnAtTheFirstRenewal(t *testing.T) {
	b, key, l, released := turnAfterWait(t, opts("waiter", true))
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitMarked(t, b, key, released)
}

// A release into a minimum hold marks before it: the entry stays the
// holder's for the hold, and status shows it.
func TestWaiterMarksItsTurnBeforeAMinimumHold(t *testing.T) {
	o := opts("waiter", true)
	o.MinHold = time.Minute
	b, key, l, released := turnAfterWait(t, o)
	backend.Started(l)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := inspect(t, b, key); st.Holder != "waiter" || st.Since.Before(released) {
		t.Errorf("in the minimum hold: holder %q since %v, want the waiter since its turn, after the release at %v", st.Holder, st.Since, released)
	}
}

// turnAfterWait queues a waiter with o behind a holder, releases the
// holder and returns the waiter's lease, given back when the test ends,
// and when the holder's release began.
func turnAfterWait(t *testing.T, o backend.AcquireOptions) (*Backend, string, backend.Lease, time.Time) {
	t.Helper()
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	first := backendtest.MustAcquire(t, b, key, opts("first", false))
	w := openTest(t, srv.URL())
	got := make(chan backend.Lease, 1)
	go func() {
		l, err := w.Acquire(t.Context(), key, o)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	waitQueued(t, c, key, 2)
	released := time.Now()
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	t.Cleanup(func() { _ = backend.GiveBack(t.Context(), l) })
	return b, key, l, released
}

// waitMarked waits for key's status to show its holder since after
// released.
func waitMarked(t *testing.T, b *Backend, key string, released time.Time) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := inspect(t, b, key)
		if !st.Since.Before(released) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("since %v, want its turn, after the release at %v (%+v)", st.Since, released, st)
		}
	}
}

func inspect(t *testing.T, b *Backend, key string) backend.Status {
	t.Helper()
	st, err := b.Inspect(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
