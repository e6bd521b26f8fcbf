package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// A front waiter whose process is frozen while its session stays alive
// holds the head of the line and never takes the lock. The waiters behind
// it must not wait for it forever: the server ends the frozen front's
// session once it is silent past the lease it saw, plus frontSlack. The
// same holds of a front of an older lockrun, which held the line's lock
// where this one holds the front's.
func TestStuckFrontWaiterDoesNotBlockTheLine(t *testing.T) {
	for _, older := range []bool{false, true} {
		t.Run(map[bool]string{false: "front", true: "older"}[older], func(t *testing.T) {
			raw := pgtest.Isolated(t, pgtest.Shared())
			b := open(t, raw)
			holder, err := b.Acquire(t.Context(), "k", opts("holder"))
			if err != nil {
				t.Fatal(err)
			}
			id := frontID(b.table, "k")
			if older {
				id = queueID(b.table, "k")
			}
			front := stuckAt(t, b, id, holder.TTL())
			go func() {
				time.Sleep(300 * time.Millisecond)
				_ = holder.Release(context.Background()) // the NOTIFY reaches no one awake
			}()
			bound := holder.TTL() + frontSlack // the stuck front's silence, at most
			ctx, cancel := context.WithTimeout(t.Context(), bound+3*time.Second)
			defer cancel()
			o := opts("behind")
			o.Wait = true
			begin := time.Now()
			l, err := open(t, raw).Acquire(ctx, "k", o)
			if err != nil {
				t.Fatalf("waiter behind a stuck front: %v after %v", err, time.Since(begin))
			}
			if took := time.Since(begin); took > bound+time.Second {
				t.Errorf("waiter behind a stuck front got the lock after %v; want about the holder's ttl and the slack, %v", took, bound)
			}
			l.Release(t.Context())
			front.Rollback(t.Context())
		})
	}
}

// stuckFront takes the head of key's waiting line as a waiter does that
// saw a lease with left to run, and then freezes (see stuckAt).
func stuckFront(t *testing.T, b *Backend, key string, left time.Duration) pgx.Tx {
	return stuckAt(t, b, frontID(b.table, key), left)
}

// stuckAt takes advisory lock id as a waiter takes its place in line
// (see queue.sql), having seen a lease with left to run, on a session of
// its own, and then freezes: it never speaks on that session again.
func stuckAt(t *testing.T, b *Backend, id int64, left time.Duration) pgx.Tx {
	t.Helper()
	c, err := pgx.ConnectConfig(t.Context(), b.conns.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	tx, err := c.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), queueSQL, id, serverMS(lineBackstop), serverMS(left+frontSlack)); err != nil {
		t.Fatal(err)
	}
	return tx
}

// A waiter keeps its place in line however long the holder renews: it is
// not woken, nor sent to the back of the line, when the lease it saw on
// joining would have expired. The front keeps its place by speaking on
// its queue session before a sleep that would outlast it.
func TestWaitersKeepTheirPlaceWhileTheHolderRenews(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	holder, err := b.Acquire(t.Context(), "k", opts("holder"))
	if err != nil {
		t.Fatal(err)
	}
	first, second, before := queueTwo(t, b, open(t, raw), open(t, raw))
	renewFor(t, holder, 3*holder.TTL())
	if after := lineOf(t, b, "k"); after != before {
		t.Errorf("after three ttls of renewals the line is %+v; want %+v", after, before)
	}
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := granted(t, first)
	select {
	case <-second:
		t.Fatal("the second waiter got the lock while the first held it")
	case <-time.After(100 * time.Millisecond):
	}
	_ = l.Release(t.Context())
	_ = granted(t, second).Release(t.Context())
}

// line is who holds a key's waiting line: the front, which listens and
// tries; the waiter next in line, and its second session, which waits
// for the front's place; one waiting behind it; and since when the latest
// of those began to wait. Server process ids, zero for none.
type line struct {
	front, next, nextAt, behind int
	since                       time.Time
}

// lineOf reads the line of key.
func lineOf(t *testing.T, b *Backend, key string) line {
	t.Helper()
	var l line
	scanRow(t, b, `SELECT coalesce(max(pid) FILTER (WHERE id = $2 AND granted), 0),
		coalesce(max(pid) FILTER (WHERE id = $1 AND granted), 0),
		coalesce(max(pid) FILTER (WHERE id = $2 AND NOT granted), 0),
		coalesce(max(pid) FILTER (WHERE id = $1 AND NOT granted), 0),
		coalesce(max(waitstart) FILTER (WHERE NOT granted), 'epoch')
		FROM (SELECT pid, granted, waitstart, classid::bigint << 32 | objid::bigint AS id
			FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1) l
		WHERE id IN ($1, $2)`, []any{queueID(b.table, key), frontID(b.table, key)}, &l.front, &l.next, &l.nextAt, &l.behind, &l.since)
	return l
}

// A release tells whether someone waits in the key's line, so that Close
// waits (see closeDelay) only then: a run that hands the lock on keeps
// its sessions' ends out of the next holder's start, and one that does
// not exits at once.
func TestReleaseTellsWhetherSomeoneWaits(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	for _, waiter := range []bool{false, true} {
		b := open(t, raw)
		l, err := b.Acquire(t.Context(), "k", opts("holder"))
		if err != nil {
			t.Fatal(err)
		}
		var next <-chan backend.Lease
		if waiter {
			next = waitFor(t, open(t, raw), "k", opts("waiter"))
			until(t, "the waiter at the front", func() bool { return lineOf(t, b, "k").front != 0 })
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := b.handedOn.Load(); got != waiter {
			t.Errorf("someone waiting: %v; the release says %v", waiter, got)
		}
		if waiter {
			_ = granted(t, next).Release(t.Context())
		}
	}
}

// A front waiter on a slow link keeps its place: woken when the lease it
// saw would have expired, it tries and speaks again, a round trip each,
// before the server ends its place.
func TestFrontOnASlowLinkKeepsItsPlace(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	holder, err := b.Acquire(t.Context(), "k", opts("holder"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := netproxy.Start(t, "127.0.0.1:5432")
	first, second, before := queueTwo(t, b, open(t, pgtest.WithHost(t, raw, proxy.Addr())), open(t, raw))
	proxy.SetLatency(netproxy.Both, 400*time.Millisecond) // 800 ms round trips
	renewFor(t, holder, 3*holder.TTL())
	if after := lineOf(t, b, "k"); after.front != before.front {
		t.Errorf("with 800 ms round trips the front lost its place (pid %d, now %d)", before.front, after.front)
	}
	proxy.SetLatency(netproxy.Both, 0)
	handOn(t, holder, first, second)
}

// queueTwo has a first waiter, on fb, come to the front of key "k"'s line
// (b's table) and a second, on sb, wait behind it; it returns what each
// will be granted, and the line then.
func queueTwo(t *testing.T, b, fb, sb *Backend) (first, second <-chan backend.Lease, at line) {
	t.Helper()
	first = waitFor(t, fb, "k", opts("first"))
	until(t, "the first waiter at the front", func() bool { return lineOf(t, b, "k").front != 0 })
	second = waitFor(t, sb, "k", opts("second"))
	until(t, "the second waiter next in line", func() bool { l := lineOf(t, b, "k"); return l.next != 0 && l.nextAt != 0 })
	return first, second, lineOf(t, b, "k")
}

// renewFor renews l every quarter of its TTL for d.
func renewFor(t *testing.T, l backend.Lease, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(l.TTL() / 4) {
		if err := l.Renew(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// handOn releases holder and checks that the first waiter, then the
// second, is granted the lock.
func handOn(t *testing.T, holder backend.Lease, first, second <-chan backend.Lease) {
	t.Helper()
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = granted(t, first).Release(t.Context())
	_ = granted(t, second).Release(t.Context())
}

// A front waiter cut off from the server holds up the line no longer than
// the lease it saw and frontSlack: the one behind it gets the lock then.
func TestCutOffFrontIsPassedOver(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	holder, err := b.Acquire(t.Context(), "k", opts("holder"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := netproxy.Start(t, "127.0.0.1:5432")
	waitFor(t, open(t, pgtest.WithHost(t, raw, proxy.Addr())), "k", opts("cutoff"))
	until(t, "the waiter at the front", func() bool { return lineOf(t, b, "k").front != 0 })
	proxy.Hold(netproxy.Both)
	begin := time.Now()
	second := waitFor(t, open(t, raw), "k", opts("behind"))
	until(t, "the next waiter in line", func() bool { return lineOf(t, b, "k").next != 0 })
	if err := holder.Release(t.Context()); err != nil { // no one awake hears it
		t.Fatal(err)
	}
	l := granted(t, second)
	if took, bound := time.Since(begin), holder.TTL()+frontSlack+time.Second; took > bound {
		t.Errorf("the waiter behind a cut-off front got the lock after %v; want at most %v", took, bound)
	}
	_ = l.Release(t.Context())
	proxy.Heal()
}

// A front waiter whose place the server ended (here by
// pg_terminate_backend) joins the line again, at the back, rather than
// wait outside it, where it would be served out of order.
func TestFrontThatLostItsPlaceJoinsAgain(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	holder, err := b.Acquire(t.Context(), "k", opts("holder"))
	if err != nil {
		t.Fatal(err)
	}
	first := waitFor(t, open(t, raw), "k", opts("first"))
	until(t, "the first waiter at the front", func() bool { return lineOf(t, b, "k").front != 0 })
	pid := endFront(t, b, "k")
	go func() {
		for end := time.Now().Add(3 * holder.TTL()); time.Now().Before(end); time.Sleep(holder.TTL() / 4) {
			_ = holder.Renew(context.Background())
		}
	}()
	until(t, "the waiter back in line", func() bool { f := lineOf(t, b, "k").front; return f != 0 && f != pid })
	select {
	case <-first:
		t.Fatal("the waiter's wait ended while the lock was held")
	default:
	}
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = granted(t, first).Release(t.Context())
}

// endFront ends the session at the head of key's waiting line and
// returns its server process id.
func endFront(t *testing.T, b *Backend, key string) int {
	t.Helper()
	var pid int
	scanRow(t, b, `SELECT pid, pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND objsubid = 1 AND granted
		AND (classid::bigint << 32 | objid::bigint) = $1`, []any{frontID(b.table, key)}, &pid, nil)
	return pid
}

// A statement_timeout (one set for the role, the database or the URL's
// options) ends no wait in line, nor moves a waiter from its place: the
// wait is the caller's to end, not the server's.
func TestStatementTimeoutDoesNotEndTheWait(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	holder, err := b.Acquire(t.Context(), "k", lineOpts("holder"))
	if err != nil {
		t.Fatal(err)
	}
	impatient := pgtest.WithParam(t, raw, "options", "-c statement_timeout=300")
	first, second, before := queueTwo(t, b, open(t, impatient), open(t, impatient))
	time.Sleep(time.Second) // three of the second waiter's statement_timeouts
	if after := lineOf(t, b, "k"); after != before {
		t.Errorf("a waiter left its place: the line was %+v, then %+v", before, after)
	}
	handOn(t, holder, first, second)
}

// A waiter that joins the line on a slow link, behind a lease of little
// time left, keeps the place it comes to: it connects a session, listens
// and tries there (four round trips or so) before it can first speak.
func TestFrontJoiningOnASlowLinkKeepsItsPlace(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	o := opts("holder")
	o.TTL = 200 * time.Millisecond
	holder, err := b.Acquire(t.Context(), "k", o)
	if err != nil {
		t.Fatal(err)
	}
	renewing, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(renewing)
		for ; ; time.Sleep(o.TTL / 4) {
			select {
			case <-stop:
				return
			default:
				_ = holder.Renew(context.Background())
			}
		}
	}()
	proxy := netproxy.Start(t, "127.0.0.1:5432")
	proxy.SetLatency(netproxy.Both, 400*time.Millisecond) // 800 ms round trips
	first := waitFor(t, open(t, pgtest.WithHost(t, raw, proxy.Addr())), "k", opts("first"))
	for end := time.Now().Add(15 * time.Second); lineOf(t, b, "k").front == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the first waiter never came to the front")
		}
	}
	second := waitFor(t, open(t, raw), "k", opts("second"))
	until(t, "the second waiter next in line", func() bool { return lineOf(t, b, "k").next != 0 })
	before := lineOf(t, b, "k")
	time.Sleep(6 * time.Second)
	if after := lineOf(t, b, "k"); after.front != before.front {
		t.Errorf("joining with 800 ms round trips, the front lost its place (pid %d, now %d)", before.front, after.front)
	}
	close(stop)
	<-renewing
	proxy.SetLatency(netproxy.Both, 0)
	handOn(t, holder, first, second)
}
