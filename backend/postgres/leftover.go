package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// leftover is what a wait leaves behind once its lease is granted: the
// transaction that kept its place at the head of the line, and the
// session it listened on. Ending the transaction lets the next waiter to
// the front, which then ends its place in line and listens and tries: a
// waiter's connection behind it and three statements, which would share
// the machine and the server with the start of our command, the end of
// the hand-off.
// So a plain lock's wait leaves them for after it (see Started): no one
// else can be granted the lock meanwhile anyway. A semaphore's does not:
// a slot may be free for the next waiter at once.
type leftover struct {
	queue    *pgx.Conn
	tx       pgx.Tx
	listener *pgx.Conn
}

// tidyDelay is how long after the command's exec Started waits to tidy
// up: the exec is not the end of a program's start (a dynamic loader, a
// runtime's own start). Short, since the next waiter must be listening
// again before a short command ends.
const tidyDelay = 5 * time.Millisecond

// tidyLimit is how long after the grant a lease tidies up untold: a
// caller that runs no command, or one that never says so, keeps the next
// waiter away from the front no longer than this.
const tidyLimit = time.Second

// Started settles the lease tidyDelay after the command's exec: it tidies
// up after the wait and warms the release's session (see settle). A lease
// not told tidies up at its first renewal, its release, or tidyLimit
// after the grant, whichever comes first, and is not warmed.
func (l *lease) Started() { time.AfterFunc(tidyDelay, l.settle) }

// settle tidies up after the wait, if there was one, and runs the release
// statement once, changing nothing (see warm), on the session the release
// will use: the one it listened on, or the one it was granted on. A
// server process runs a statement it has not run before a millisecond
// slower than after (its catalog caches fill then: 1.4 against 0.35 ms
// for the release on a quiet host), and the release is on the hand-off's
// path, where this is not. The lease's statements wait for it to end, and
// so does the backend's Close.
func (l *lease) settle() {
	done := make(chan struct{})
	defer close(done)
	lo, ok := l.claim(done)
	if !ok {
		return
	}
	if !l.b.conns.enter() { // closed: end the leftover as Close does
		if lo != nil {
			discard(lo.queue)
			discard(lo.listener)
		}
		return
	}
	defer l.b.conns.leave()
	ctx, cancel := context.WithTimeout(context.Background(), unlistenTimeout)
	defer cancel()
	var c *pgx.Conn
	if lo != nil {
		l.b.pending.remove(l)
		l.b.leaveQueue(lo.queue, lo.tx)
		if !l.b.stopListening(ctx, lo.listener) {
			return
		}
		c = lo.listener
	} else if c = l.b.conns.idleOne(); c == nil {
		return
	}
	l.warm(ctx, c)
	l.b.conns.put(c)
}

// warm runs l's release statement on c for the empty key and token 0,
// which no row has (keys are never empty, tokens never 0): it matches
// nothing, so it notifies no one and takes no lock. Errors are left to
// the real release to meet.
func (l *lease) warm(ctx context.Context, c *pgx.Conn) {
	sql := l.b.sql.release
	if l.semaphore {
		sql = l.b.sql.semRelease
	}
	_, _ = c.Exec(ctx, sql, "", "", int64(0), channel(l.b.table, ""), int64(0), int64(0))
}

// claim makes the caller the one to settle l, once, and hands it the
// wait's leftover: nil if none, and ok false if settling was claimed
// before. done is closed when the caller has settled.
func (l *lease) claim(done chan struct{}) (lo *leftover, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.settled != nil {
		return nil, false
	}
	l.settled = done
	lo, l.leftover = l.leftover, nil
	return lo, true
}

// awaitSettled returns once l has settled, if it began to, or ctx ends.
func (l *lease) awaitSettled(ctx context.Context) {
	l.mu.Lock()
	ch := l.settled
	l.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

// leave gives l the wait's leftover, tidied up by tidyLimit at the latest,
// or by the backend's Close.
func (l *lease) leave(lo *leftover) {
	l.mu.Lock()
	l.leftover = lo
	l.mu.Unlock()
	l.b.pending.add(l)
	time.AfterFunc(tidyLimit, func() { l.tidy(context.Background(), false) })
}

// tidy ends the wait's leftover, unless l settled or began to (it then
// waits for that): it leaves the line in the background and stops
// listening, in the background too unless now, for a statement about to
// run that should reuse the listening session.
func (l *lease) tidy(ctx context.Context, now bool) {
	done := make(chan struct{})
	defer close(done)
	lo, ok := l.claim(done)
	if !ok {
		l.awaitSettled(ctx)
		return
	}
	if lo == nil {
		return
	}
	l.b.pending.remove(l)
	l.b.leaveQueue(lo.queue, lo.tx)
	if now {
		l.b.unlistenNow(ctx, lo.listener)
	} else {
		l.b.unlisten(lo.listener)
	}
}

// closed is a channel closed already.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// leftovers are the leases whose leftover is not tidied up yet, for Close.
type leftovers struct {
	mu     sync.Mutex
	leases map[*lease]struct{}
}

func (p *leftovers) add(l *lease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leases == nil {
		p.leases = make(map[*lease]struct{})
	}
	p.leases[l] = struct{}{}
}

func (p *leftovers) remove(l *lease) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.leases, l)
}

// close ends every pending leftover at once: closing its sessions ends
// the queue transaction and the LISTEN on the server.
func (p *leftovers) close() {
	p.mu.Lock()
	leases := p.leases
	p.leases = nil
	p.mu.Unlock()
	for l := range leases {
		if lo, _ := l.claim(closed); lo != nil {
			discard(lo.queue)
			discard(lo.listener)
		}
	}
}
