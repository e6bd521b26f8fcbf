package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// The waiter next in line comes to the front on the session it queued on,
// which ran the lease's statements already: it listens and tries there,
// not on a session connected then (a server process's start, and its
// caches filled, in the window of a short job's hand-off).
func TestNextWaiterFrontsOnTheSessionItQueuedOn(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	holder, err := b.Acquire(t.Context(), "k", lineOpts("holder"))
	if err != nil {
		t.Fatal(err)
	}
	first, second, at := queueTwo(t, b, open(t, raw), open(t, raw))
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := granted(t, first)
	backend.Started(l)
	until(t, "the second waiter at the front", func() bool {
		now := lineOf(t, b, "k")
		return now.front == at.nextAt && now.next == 0
	})
	until(t, "the second waiter's try on the session it queued on", func() bool {
		q := lastQuery(t, b, uint32(at.next))
		return len(q) > 100 && strings.HasPrefix(b.sql.acquire, q)
	})
	_ = l.Release(t.Context())
	_ = granted(t, second).Release(t.Context())
}

// A waiter next in line that is cut off from the server holds up the line
// no longer than a front would, whatever its own TTL: its place in line,
// kept by the lease it saw, and the front's place it is then granted,
// each end once silent past that lease and frontSlack, and the waiter
// behind it gets the lock.
func TestCutOffNextIsPassedOver(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	b := open(t, raw)
	holder, err := b.Acquire(t.Context(), "k", opts("holder"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := netproxy.Start(t, "127.0.0.1:5432")
	first := waitFor(t, open(t, raw), "k", opts("first"))
	until(t, "the first waiter at the front", func() bool { return lineOf(t, b, "k").front != 0 })
	waitFor(t, open(t, pgtest.WithHost(t, raw, proxy.Addr())), "k", lineOpts("cutoff")) // a TTL of 30 s
	until(t, "the cut-off waiter next in line", func() bool { l := lineOf(t, b, "k"); return l.next != 0 && l.nextAt != 0 })
	renewFor(t, holder, 2*frontSlack) // past the next's first words to keep its place
	proxy.Hold(netproxy.Both)
	third := waitFor(t, open(t, raw), "k", opts("third"))
	until(t, "the third waiter in line", func() bool { return lineOf(t, b, "k").behind != 0 })
	begin := time.Now()
	if err := holder.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	l := granted(t, first)
	backend.Started(l)
	if err := l.Release(t.Context()); err != nil { // no one awake hears it
		t.Fatal(err)
	}
	got := granted(t, third)
	if took, bound := time.Since(begin), holder.TTL()+frontSlack+time.Second; took > bound {
		t.Errorf("the waiter behind a cut-off one got the lock after %v; want at most %v", took, bound)
	}
	_ = got.Release(t.Context())
	proxy.Heal()
}
