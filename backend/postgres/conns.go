package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// maxIdle is how many idle sessions a backend keeps: one lockrun uses one
// at a time for its statements, plus one while it waits.
const maxIdle = 4

// closeTimeout bounds saying goodbye to the server (a Terminate message).
const closeTimeout = time.Second

// conns is a small pool of sessions. pgxpool would do, except that its
// Close waits up to 15 s for every broken connection's cancel request: a
// lockrun whose link to the server died would hang at exit. Here a broken
// session is dropped at once; pgx cancels its query in the background.
type conns struct {
	cfg   *pgx.ConnConfig
	plain *pgx.ConnConfig // see plainAfterPrefer; nil if none

	mu     sync.Mutex
	idle   []*pgx.Conn
	closed bool
	users  sync.WaitGroup // see enter
	unsure bool           // a session with cfg ended in plaintext: see learn
	asked  bool           // learn asked the server whether it has TLS
	noTLS  bool           // it has none: use plain
}

// newConns is a pool of sessions connected with cfg.
func newConns(cfg *pgx.ConnConfig) *conns {
	return &conns{cfg: cfg, plain: plainAfterPrefer(cfg)}
}

// get returns an idle session, or connects a new one under ctx.
func (p *conns) get(ctx context.Context) (*pgx.Conn, error) {
	if c := p.idleOne(); c != nil {
		return c, nil
	}
	p.mu.Lock()
	cfg := p.cfg
	if p.noTLS {
		cfg = p.plain
	}
	p.mu.Unlock()
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil && cfg == p.cfg && p.plain != nil && !encrypted(c) {
		p.mu.Lock()
		p.unsure = true
		p.mu.Unlock()
	}
	return c, err
}

// idleOne returns the session put back last, or nil if none is idle.
func (p *conns) idleOne() *pgx.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return nil
	}
	c := p.idle[n-1]
	p.idle = p.idle[:n-1]
	return c
}

// learn asks the server behind c, idle, whether it has TLS, once, if a
// session made with cfg ended in plaintext: a server without TLS says no
// to every TLS request, and pgx's prefer then connects twice, so later
// sessions use plain. A waiter calls it before it joins the line, where a
// round trip costs no one anything and its second session is to come;
// a run that does not wait never asks. A session can also be plaintext
// because a TLS attempt failed once, or pg_hba refused a TLS session,
// with a server that has TLS: later sessions keep asking for it, as pgx's
// prefer does, and so they do when the server cannot say (a server that
// only speaks PostgreSQL's protocol may not know the setting); a session
// broken meanwhile fails its caller's next statement.
func (p *conns) learn(ctx context.Context, c *pgx.Conn) {
	p.mu.Lock()
	ask := p.unsure && !p.asked
	p.asked = p.asked || ask
	p.mu.Unlock()
	if !ask {
		return
	}
	var ssl string
	if err := c.QueryRow(ctx, "SHOW ssl").Scan(&ssl); err != nil {
		return
	}
	p.mu.Lock()
	p.noTLS = ssl == "off"
	p.mu.Unlock()
}

// put keeps c for reuse if it is healthy and idle, else closes it.
func (p *conns) put(c *pgx.Conn) {
	pc := c.PgConn()
	if pc.IsClosed() || pc.IsBusy() || pc.TxStatus() != 'I' {
		discard(c)
		return
	}
	p.mu.Lock()
	if !p.closed && len(p.idle) < maxIdle {
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		discard(c)
	}
}

// enter registers work in the background that close must wait for (it
// may hold a session close would not find idle); false once closed.
// leave ends it.
func (p *conns) enter() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.users.Add(1)
	return true
}

func (p *conns) leave() { p.users.Done() }

// close closes every idle session, and waits for the work registered
// with enter; sessions in use are closed when put.
func (p *conns) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		discard(c)
	}
	p.users.Wait()
}

// discard closes c without waiting long for a server that may be gone.
func discard(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	_ = c.Close(ctx)
}
