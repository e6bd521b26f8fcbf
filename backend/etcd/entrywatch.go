package etcd

import (
	"context"
	"sync"

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
	live   bool               // a watch runs and has seen nothing
	fired  bool               // alarm is closed
	cancel context.CancelFunc // ends the watch; nil when none runs
	gen    int                // counts the watches started: an ended one that was replaced says nothing
	over   bool               // stopped for good: the lease was released
	seen   int64              // the highest store revision known since the watch began
}

func newEntryWatch() *entryWatch { return &entryWatch{alarm: make(chan struct{})} }

// quiet says whether a watch runs and has seen no change, rev being the
// store's revision a keep-alive just came back with: the entry is then
// the one it was when the watch began, and no marker was written. A
// revision below one seen before (or none) is not quiet: the store went
// back, or cannot tell.
func (w *entryWatch) quiet(rev int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if rev == 0 || rev < w.seen {
		return false
	}
	w.seen = rev
	return w.live
}

// running says whether a watch runs and has seen no change.
func (w *entryWatch) running() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.live
}

// start watches e's entry and marker in b from revision rev on, replacing
// the watch that ran before, if any.
func (w *entryWatch) start(b *Backend, e entry, rev int64) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(b.shut))
	w.mu.Lock()
	if w.over {
		w.mu.Unlock()
		cancel()
		return
	}
	if w.cancel != nil {
		w.cancel()
	}
	w.gen++
	gen := w.gen
	w.cancel, w.live, w.seen = cancel, true, rev-1
	w.mu.Unlock()
	go func() {
		defer cancel()
		// Watch waits for the server to confirm each watch, which the
		// caller (a renewal) must not: from rev on, nothing is missed
		// however late they start. One context: one gRPC stream.
		entries := b.cli.Watch(ctx, e.name, clientv3.WithRev(rev))
		markers := b.cli.Watch(ctx, b.markerName(e.key, e.name), clientv3.WithRev(rev), clientv3.WithFilterDelete())
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
	w.live = false
	if saw && !w.fired {
		w.fired = true
		close(w.alarm)
	}
}

// stop ends the watch, if one runs, and any started later.
func (w *entryWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.over = true
	if w.cancel != nil {
		w.cancel()
		w.cancel, w.live = nil, false
	}
}
