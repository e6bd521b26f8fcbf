package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// leftover is what a wait leaves behind once its lease is granted: the
// queue transaction that kept its place at the head of the line, and the
// session it listened on. Ending the transaction lets the next waiter to
// the front, which then connects a session, listens and tries: a server
// process's start and three statements, which would share the machine
// and the server with the start of our command, the end of the hand-off.
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

// Started tidies up after the wait, tidyDelay after the command's exec.
// A lease not told tidies up at its first renewal, its release, or
// tidyLimit after the grant, whichever comes first.
func (l *lease) Started() {
	if l.hasLeftover() {
		time.AfterFunc(tidyDelay, func() { l.tidy(context.Background(), false) })
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

// takeLeftover returns l's leftover, once.
func (l *lease) takeLeftover() *leftover {
	l.mu.Lock()
	defer l.mu.Unlock()
	lo := l.leftover
	l.leftover = nil
	return lo
}

func (l *lease) hasLeftover() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leftover != nil
}

// tidy ends the wait's leftover, once: it leaves the line in the
// background and stops listening, in the background too unless now, for a
// statement about to run that should reuse the listening session.
func (l *lease) tidy(ctx context.Context, now bool) {
	lo := l.takeLeftover()
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
		if lo := l.takeLeftover(); lo != nil {
			discard(lo.queue)
			discard(lo.listener)
		}
	}
}
