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
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	first := backendtest.MustAcquire(t, b, key, opts("first", false))
	got := make(chan backend.Lease, 1)
	go func() {
		l, err := openTest(t, srv.URL()).Acquire(t.Context(), key, opts("waiter", true))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	time.Sleep(300 * time.Millisecond)
	released := time.Now()
	if err := first.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		return
	}
	defer l.Release(t.Context())
	time.Sleep(300 * time.Millisecond) // what a mark sent at the grant would take
	if st := inspect(t, b, key); st.Holder != "waiter" || !st.Since.Before(released) {
		t.Errorf("before Started: holder %q since %v, want the waiter since it queued, before the release at %v", st.Holder, st.Since, released)
	}
	backend.Started(l)
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := inspect(t, b, key)
		if !st.Since.Before(released) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Started: since %v, want its turn, after the release at %v", st.Since, released)
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
