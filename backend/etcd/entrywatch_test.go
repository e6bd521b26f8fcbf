package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

// TestRenewalIsOneRequest: after the first renewal, which reads the entry
// and starts its watch, each renewal is its keep-alive alone.
func TestRenewalIsOneRequest(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("a", false))
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the watches' create requests arrive
	before := srv.Received(t)
	const renewals = 10
	for range renewals {
		if err := l.Renew(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if got := srv.Received(t) - before; got != renewals {
		t.Errorf("%d renewals sent %d requests, want one each", renewals, got)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestEntryChangesWakeTheHolder: between renewals, a holder's entry
// deleted by hand, or a revoke, closes Done at once, and the next renewal
// says the lock is lost.
func TestEntryChangesWakeTheHolder(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c := openTest(t, srv.URL()), srv.Client(t)
	for _, tc := range []struct {
		name   string
		change func(key, entry string) error
	}{
		{"entry deleted", func(_, entry string) error { _, err := c.Delete(t.Context(), entry); return err }},
		{"entry replaced", func(_, entry string) error {
			if _, err := c.Delete(t.Context(), entry); err != nil {
				return err
			}
			_, err := c.Put(t.Context(), entry, "")
			return err
		}},
		{"revoked", func(key, _ string) error { return b.Revoke(t.Context(), key, 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := backendtest.Key(t)
			l := backendtest.MustAcquire(t, b, key, opts("a", false)).(*lease)
			defer l.GiveBack(t.Context())
			if err := l.Renew(t.Context()); err != nil {
				t.Fatal(err)
			}
			select {
			case <-l.Done():
				t.Fatal("Done closed before any change")
			case <-time.After(50 * time.Millisecond):
			}
			if err := tc.change(key, l.e.name); err != nil {
				t.Fatal(err)
			}
			wantDoneThenLost(t, l, "the change")
		})
	}
}

// TestOwnMarkDoesNotWakeTheHolder: the holder's own writes to its entry
// (the mark of when its turn came) keep its create revision, and the
// renewals after them stay one request each.
func TestOwnMarkDoesNotWakeTheHolder(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("a", false)).(*lease)
	defer l.GiveBack(t.Context())
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.markOnce(l.e, time.Now().UnixMicro())
	select {
	case <-l.Done():
		t.Fatal("the holder's own mark closed Done")
	case <-time.After(200 * time.Millisecond):
	}
	if !l.watch.running() {
		t.Error("the holder's own mark ended the watch")
	}
}

// TestWatchOnACompactedRevisionFallsBackToReads: a watch that cannot
// start (its revision compacted away) leaves the renewals reading, and
// the next one watches again.
func TestWatchOnACompactedRevisionFallsBackToReads(t *testing.T) {
	srv := etcdtest.Start(t)
	b, c, key := openTest(t, srv.URL()), srv.Client(t), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("a", false)).(*lease)
	defer l.GiveBack(t.Context())
	for range 3 {
		if _, err := c.Put(t.Context(), "other", "x"); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.Get(t.Context(), "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(t.Context(), resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	l.watch.start(b, l.e, l.e.rev) // as if a read had been at the entry's creation
	deadline := time.Now().Add(2 * time.Second)
	for l.watch.running() {
		if time.Now().After(deadline) {
			t.Fatal("a watch on a compacted revision still counts as quiet after 2 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, l.watch) // the renewal after a failed watch watches again
	select {
	case <-l.Done():
		t.Error("a failed watch closed Done")
	default:
	}
}

// TestStartedWatchesBeforeAnyRenewal: once the command started, a revoke
// reaches the holder at once, not at its first renewal (a TTL's third
// later).
func TestStartedWatchesBeforeAnyRenewal(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("a", false)).(*lease)
	defer l.GiveBack(t.Context())
	l.Started()
	time.Sleep(markDelay + 100*time.Millisecond)
	if err := b.Revoke(t.Context(), key, 0); err != nil {
		t.Fatal(err)
	}
	wantDoneThenLost(t, l, "the revoke")
}

// slowWatcher is the client's watcher, slow to confirm each watch, as on
// a member the stream reaches late.
type slowWatcher struct {
	clientv3.Watcher
	delay time.Duration
}

func (s slowWatcher) Watch(ctx context.Context, key string, o ...clientv3.OpOption) clientv3.WatchChan {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
	}
	return s.Watcher.Watch(ctx, key, o...)
}

// TestRenewDoesNotWaitForTheWatch: a renewal that starts the watch
// returns by its own deadline, however long the watch takes to start.
func TestRenewDoesNotWaitForTheWatch(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("a", false))
	defer l.Release(context.Background())
	b.cli.Watcher = slowWatcher{Watcher: b.cli.Watcher, delay: 3 * time.Second}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := l.Renew(ctx)
	if took := time.Since(began); took > time.Second || err != nil {
		t.Errorf("Renew with a 500 ms deadline = %v after %v; want nil, at once", err, took.Round(time.Millisecond))
	}
}

// TestStoreGoneBackIsNotQuiet: a keep-alive that comes back from a store
// that went back (a lower revision or raft term, another cluster: a
// restore from a snapshot) makes the renewal read, however quiet the
// watch, and ends that watch.
func TestStoreGoneBackIsNotQuiet(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("a", false)).(*lease)
	defer l.GiveBack(t.Context())
	at := func(cluster, term uint64, rev int64) *pb.ResponseHeader {
		return &pb.ResponseHeader{ClusterId: cluster, RaftTerm: term, Revision: rev}
	}
	for _, tc := range []struct {
		name string
		h    *pb.ResponseHeader
	}{
		{"a lower revision", at(7, 3, 110)},
		{"a lower term", at(7, 2, 130)},
		{"another cluster", at(8, 3, 130)},
		{"no header", nil},
	} {
		l.watch.start(b, l.e, 100)
		waitRunning(t, l.watch)
		if !l.watch.quiet(at(7, 3, 120)) {
			t.Fatal("a running watch is not quiet at a later revision")
		}
		if l.watch.quiet(tc.h) {
			t.Errorf("%s counts as quiet", tc.name)
		}
		if tc.h != nil && l.watch.running() {
			t.Errorf("%s left the watch running", tc.name)
		}
		l.watch.mu.Lock()
		l.watch.drop()
		l.watch.store = storeMark{}
		l.watch.mu.Unlock()
	}
}

// waitRunning waits up to 10 s for w's watch to be set up: a new gRPC
// stream's confirmation, which took over 2 s once in CI, under -race
// beside the other packages' tests on two cores.
func waitRunning(t *testing.T, w *entryWatch) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !w.running(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watch was not set up within 10 s")
		}
	}
}

// TestWatchBeingSetUpIsNotQuiet: until the server confirms the watch,
// renewals read, so a revoke meanwhile is lost at the next renewal.
func TestWatchBeingSetUpIsNotQuiet(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("a", false))
	defer l.Release(context.Background())
	b.cli.Watcher = slowWatcher{Watcher: b.cli.Watcher, delay: 3 * time.Second}
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Revoke(t.Context(), key, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Renew after a revoke, the watch not set up yet = %v, want ErrLost", err)
	}
}

// wantDoneThenLost checks that l's watch saw what happened (Done closes
// within 2 s, with no renewal meanwhile) and that the renewal after it
// fails with ErrLost.
func wantDoneThenLost(t *testing.T, l *lease, what string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatalf("Done not closed 2 s after %s", what)
	}
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Renew after %s = %v, want ErrLost", what, err)
	}
}
