package bench

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"
)

// queueLen is how many waiters queue behind the holder in the hand-off
// measure.
const queueLen = 5

// handoff times the hand-off, one command's end to the next one's start,
// with waiters blocked in the tool's own wait, against the floor: a shell
// starting the same commands one after the other, with no lock.
func (e *env) handoff(tgs []target) *table {
	rounds := e.samplesOf(20)
	t := &table{
		title: "2. Hand-off: the holder's command exits → the next waiter's command starts",
		note: fmt.Sprintf("p50 (p99) of %d hand-offs per tool: %d rounds of a holder and %d waiters queued in their wait "+
			"(`--wait` for lockrun), lockrun and the peer in turn; each command holds the lock %s. The floor is `sh` "+
			"starting the same command right after the last one, without a lock; the round trip is one request "+
			"from a Go client to the server.", rounds*queueLen, rounds, queueLen, jobHold),
		head: []string{"backend", "round trip", "floor (no lock)", "peer", "peer", "lockrun", "lockrun / peer", "lockrun − floor"},
	}
	for _, tg := range tgs {
		var floor, peer, lr samples
		tools, results := []tool{tg.lockrun, tg.peer}, []*samples{&lr, &peer}
		for round := range rounds {
			floor = append(floor, e.floorChain()...)
			for i := range tools {
				j := (i + round) % len(tools) // lockrun first one round, the peer the next
				c, err := e.runChain(tools[j], queueLen, nil, nil)
				if err != nil {
					e.tb.Fatal(err)
				}
				*results[j] = append(*results[j], c.handoffs...)
			}
		}
		var rtt time.Duration
		if tg.rtt != nil {
			rtt = tg.rtt()
		}
		t.add(tg.name, ms(rtt), ms(floor.p50()), "`"+tg.peer.name+"`", p50p99(peer), p50p99(lr),
			durRatio(lr.p50(), peer.p50()), ms(lr.p50()-floor.p50()))
	}
	return t
}

// floorChain runs queueLen+1 stamps one after the other in one shell and
// returns the gaps between them.
func (e *env) floorChain() samples {
	log := filepath.Join(e.dir, e.key("floor")+".log")
	script := strings.Repeat(e.stamp+" -hold "+jobHold+" -log "+log+" >/dev/null; ", queueLen+1)
	if _, err := timed([]string{"sh", "-c", script}); err != nil {
		e.tb.Fatal(err)
	}
	c, err := drained(log, queueLen, 0, nil)
	if err != nil {
		e.tb.Fatal(err)
	}
	return c.handoffs
}

// scaling drains queues of 1, 10, 100 and 1000 waiters: the hand-off, the
// server requests and the waiters' wake-ups per hand-off should not grow
// with the queue. Peers are measured up to their maxQueue waiting if
// set, else up to peerQueueMax.
func (e *env) scaling(tgs []target) *table {
	sizes := []int{1, 10, 100, 1000}
	if e.short {
		sizes = sizes[:2]
	}
	t := &table{
		title: "6. Scaling: hand-offs with 1, 10, 100 and 1000 waiting",
		note: "One holder and N waiters queued, then drained (short queues again, for at least " + fmt.Sprint(minHandoffs) +
			" hand-offs). p50 hand-off; server requests per hand-off (redis: commands clients sent, not those run by " +
			"scripts; etcd: gRPC messages received; postgres: statements); " +
			"wake-ups: context switches of a waiting tool process per hand-off it waited through " +
			"(the slope over the queue: ~0 when only the next in line wakes, more with a herd or a poll); " +
			"memory: the PSS of one queued lockrun and its watchdog, the mean over the queue. Peers up to " +
			fmt.Sprint(peerQueueMax) + " waiting; those that wait as lockrun does, without polling, in a light process " +
			"(" + longQueuePeers(tgs) + "), up to 1000. Each tool keeps its default lease: a long queue's renewals " +
			"while it waits (lockrun every 10 s, `etcdctl lock` every 3.3 s) add to its requests per hand-off. " +
			"The host with lockrun's N waiting, before its queue drains: the floor of section 2 (a shell starting " +
			"one command after another, no lock), and one request's round trip from a Go client to the server: " +
			"what the waiters' mere presence costs every process and the server.",
		head: []string{"backend", "waiting", "peer", "peer p50", "peer req/hand-off", "peer wake-ups", "lockrun p50", "lockrun req/hand-off", "lockrun wake-ups", "lockrun PSS per waiter", "floor, N waiting", "round trip, N waiting"},
	}
	for _, tg := range tgs {
		for _, n := range sizes {
			row := []string{tg.name, fmt.Sprint(n), "`" + tg.peer.name + "`"}
			var host loaded
			for _, tl := range []tool{tg.peer, tg.lockrun} {
				if tl.name != "lockrun" && n > cmp.Or(tl.maxQueue, peerQueueMax) {
					row = append(row, "—", "—", "—")
					continue
				}
				var whileQueued func()
				if tl.name == "lockrun" {
					whileQueued = func() { host.measure(e, tg.rtt) }
				}
				c, err := e.chains(tl, n, tg.served, whileQueued)
				if err != nil {
					e.tb.Fatal(err)
				}
				req, wake := "—", "—"
				if tg.served != nil {
					req = num(round1(float64(c.requests) / float64(len(c.handoffs))))
				}
				if n > 1 {
					wake = num(round1(c.slope))
				}
				row = append(row, ms(c.handoffs.p50()), req, wake)
				if tl.name == "lockrun" {
					row = append(row, mib(c.waiterPSS))
				}
			}
			t.add(append(row, host.cells()...)...)
		}
	}
	return t
}

// peerQueueMax is the longest queue of a peer in the scaling measure
// unless its tool says otherwise: a thousand Python interpreters (kazoo)
// or shells polling Redis would measure the machine rather than the tool.
const peerQueueMax = 100

// longQueuePeers names the peers of tgs queued past peerQueueMax.
func longQueuePeers(tgs []target) string {
	var names []string
	for _, tg := range tgs {
		if tg.peer.maxQueue > peerQueueMax {
			names = append(names, "`"+tg.peer.name+"`")
		}
	}
	if len(names) == 0 {
		return "none here"
	}
	return strings.Join(names, ", ")
}

// minHandoffs is how many hand-offs the scaling measure takes at least
// for each queue length: a queue of one is drained that many times.
const minHandoffs = 20

// chains drains queues of n waiters until minHandoffs hand-offs were
// seen, and sums them up; the slope and the memory are the means of the
// queues'. whileQueued is runChain's.
func (e *env) chains(tl tool, n int, served func() int64, whileQueued func()) (chain, error) {
	var all chain
	runs := (minHandoffs + n - 1) / n
	for range runs {
		c, err := e.runChain(tl, n, served, whileQueued)
		if err != nil {
			return chain{}, err
		}
		all.handoffs = append(all.handoffs, c.handoffs...)
		all.requests += c.requests
		all.slope += c.slope / float64(runs)
		all.waiterPSS += c.waiterPSS / int64(runs)
	}
	return all, nil
}

// loaded is the host's speed while a queue waits: section 2's floor,
// and one request's round trip to the server (0: no server). The
// first queue of a row measures it; the others leave it be.
type loaded struct {
	floor, rtt time.Duration
	done       bool
}

// measure takes the floor and, if rtt is not nil, the round trip, the
// first time it is called.
func (l *loaded) measure(e *env, rtt func() time.Duration) {
	if l.done {
		return
	}
	l.done = true
	var floor samples
	for range 4 {
		floor = append(floor, e.floorChain()...)
	}
	l.floor = floor.p50()
	if rtt != nil {
		l.rtt = rtt()
	}
}

// cells are the row's two columns: "—" for what was not measured.
func (l *loaded) cells() []string { return []string{ms(l.floor), ms(l.rtt)} }

func round1(v float64) float64 { return math.Round(v*10) / 10 }
