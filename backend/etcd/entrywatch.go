package etcd

import (
	"context"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// entryWatch follows a holder's entry and its revocation marker, from its
// creation once the command started (see lease.Started) or from the
// revision a renewal read them at, so that the renewals need only their
// keep-alive: one request per renewal, where a read beside
// each keep-alive would make two. It tells more, and sooner: the entry
// deleted or replaced, or the marker written, fires alarm at once, and
// the heartbeat renews on it (see lease.Done) instead of at its next tick.
//
// The watch is a hint, never the proof: a renewal that finds it fired or
// ended (a compacted revision, a member that lost its leader, the client
// closing), or a store whose revision went back (restored from a snapshot
// without --bump-revision: a watch resumed there would skip what it had
// not seen), reads the entry as before, and watches again from that read.
type entryWatch struct {
	alarm chan struct{} // closed when the watch saw the entry or marker change

	mu     sync.Mutex
	cancel context.CancelFunc // ends the current watch, being set up or running; nil when none
	live   bool               // the current watch is set up and has seen nothing
	gen    int                // counts the watches: an ended one that was replaced says nothing
	fired  bool               // alarm is closed
	over   bool               // stopped for good: the lease was released
	store  storeMark          // the store as last seen
}

// storeMark is where a store was: its cluster, raft term and revision.
// Each only grows in a cluster's life; a restore from a snapshot can set
// the term and the revision back (the revision unless --bump-revision).
type storeMark struct {
	cluster, term uint64
	rev           int64
}

func newEntryWatch() *entryWatch { return &entryWatch{alarm: make(chan struct{})} }

// quiet says whether a watch runs and has seen no change, h being the
// header a keep-alive just came back with: the entry is then the one it
// was when the watch began, and no marker was written. A store that went
// back (another cluster, a lower term or revision) is not quiet, and ends
// the watch, which may have resumed past events it will never see; nor is
// a keep-alive without a header.
func (w *entryWatch) quiet(h *pb.ResponseHeader) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.GetRevision() == 0 {
		return false
	}
	now := storeMark{h.GetClusterId(), h.GetRaftTerm(), h.GetRevision()}
	back := w.store.cluster != 0 && now.cluster != w.store.cluster || now.term < w.store.term || now.rev < w.store.rev
	w.store = now
	if back {
		w.drop()
		return false
	}
	return w.live
}

// running says whether a watch runs and has seen no change.
func (w *entryWatch) running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.live
}

// start watches e's entry and marker in b from revision rev on, unless a
// watch is being set up or runs already: it began no later than rev's
// read, and sees what this one would.
func (w *entryWatch) start(b *Backend, e entry, rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.store.rev = max(w.store.rev, rev-1)
	if w.over || w.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(b.shut))
	w.gen++
	gen := w.gen
	w.cancel = cancel
	go func() {
		defer cancel()
		// Watch waits for the server to confirm each watch, which the
		// caller (a renewal) must not, and until it has, renewals read:
		// from rev on, nothing is missed however late they start. One
		// context: one gRPC stream.
		entries := b.cli.Watch(ctx, e.name, clientv3.WithRev(rev))
		markers := b.cli.Watch(ctx, b.markerName(e.key, e.name), clientv3.WithRev(rev), clientv3.WithFilterDelete())
		w.setUp(gen)
		for {
			var resp clientv3.WatchResponse
			var ok bool
			select {
			case resp, ok = <-entries:
			case resp, ok = <-markers:
			}
			if !ok || resp.Canceled || resp.Err() != nil {
				w.ended(gen, false)
				return
			}
			for _, ev := range resp.Events {
				if changed(ev, e) {
					w.ended(gen, true)
					return
				}
			}
		}
	}()
}

// setUp records that watch number gen is set up, unless it was replaced
// or ended meanwhile.
func (w *entryWatch) setUp(gen int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen == w.gen && w.cancel != nil {
		w.live = true
	}
}

// changed says whether ev ends e's hold: the entry deleted or put anew
// (another create revision), or its marker written. A put that keeps the
// create revision (the holder's own mark, see markOnce) changes nothing.
func changed(ev *clientv3.Event, e entry) bool {
	if string(ev.Kv.Key) != e.name {
		return true // the marker: deletions are filtered out
	}
	return ev.Type == mvccpb.DELETE || ev.Kv.CreateRevision != e.rev
}

// ended records that watch number gen stopped, and fires alarm if it saw
// a change. A watch replaced or stopped meanwhile says nothing.
func (w *entryWatch) ended(gen int, saw bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen != w.gen || w.cancel == nil {
		return
	}
	w.cancel, w.live = nil, false
	if saw && !w.fired {
		w.fired = true
		close(w.alarm)
	}
}

// drop ends the current watch, if any, whose end then says nothing. w.mu
// is held.
func (w *entryWatch) drop() {
	if w.cancel != nil {
		w.cancel()
		w.cancel, w.live = nil, false
		w.gen++
	}
}

// stop ends the watch, if one runs, and any started later.
func (w *entryWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.over = true
	w.drop()
}
