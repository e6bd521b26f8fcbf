package bench

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/lockrun/lockrun/internal/netproxy"
)

// lossTTL is the lease in the loss-to-kill measure: short, so that a run
// lasts seconds.
const lossTTL = 2 * time.Second

// cut is one run of a tool whose link to the server was cut while its
// command ran.
type cut struct {
	dead    bool
	toDeath time.Duration // the cut → the command's death
	margin  time.Duration // the server's earliest possible expiry − the death
	code    int           // the tool's exit status, once dead
	overlap bool          // another contender got the lock while the command ran
}

// lossToKill cuts the link between a tool and its server (a proxy holds
// every byte both ways) while the tool's command runs, and times the
// command's death against the earliest moment the server could expire the
// lease: one TTL after the last request it can have received.
func (e *env) lossToKill(tgs []target) *table {
	runs := e.samplesOf(4)
	t := &table{
		title: "4. Loss-to-kill: the server stops answering → the command is dead",
		note: fmt.Sprintf("`--ttl %v` (heartbeat %v), the link held by a proxy %v after the command started; "+
			"the command ignores SIGTERM, so lockrun must SIGKILL it (its worst case). The margin is "+
			"(the last request the proxy passed to the server + TTL) − the command's death: "+
			"the time left before any other holder could be granted the lock. %d runs for lockrun.",
			lossTTL, (lossTTL / 3).Round(time.Millisecond), lossTTL/2, runs),
		head: []string{"backend", "tool", "cut → command dead (p50)", "margin before the lease can expire (min / p50)", "exit status"},
	}
	for _, tg := range tgs {
		if tg.addr == "" {
			t.add(tg.name, "lockrun, `"+tg.peer.name+"`", "n/a", "n/a: a flock(2) is freed only when its holder dies; it cannot expire under a live command", "—")
			continue
		}
		var toDeath, margin samples
		var codes []string
		for range runs {
			c := e.cutOnce(tg, false)
			if !c.dead || c.margin <= 0 {
				e.tb.Errorf("%s: lockrun's command outlived the lease (dead: %v, margin %v)", tg.name, c.dead, c.margin)
			}
			toDeath, margin = append(toDeath, c.toDeath), append(margin, c.margin)
			codes = append(codes, fmt.Sprint(c.code))
		}
		slices.Sort(codes)
		t.add(tg.name, "lockrun", ms(toDeath.p50()), "min "+ms(margin.pct(0))+" / p50 "+ms(margin.p50()), strings.Join(slices.Compact(codes), ", "))
		t.add(tg.name, "`"+tg.peer.name+"`", "never", peerVerdict(e.cutOnce(tg, true)), "—")
	}
	return t
}

// peerVerdict says what became of a peer's command after the cut.
func peerVerdict(c cut) string {
	switch {
	case c.dead:
		return ms(c.margin)
	case c.overlap:
		return "< −1 s: still running 1 s after the lease could expire, while another contender held the lock"
	}
	return "< −1 s: still running 1 s after the lease could expire"
}

// cutOnce runs lockrun (or the peer) through a new proxy with a long
// command, cuts the link, and waits for the command's death until a
// second after the lease could expire.
func (e *env) cutOnce(tg target, peer bool) cut {
	p := netproxy.Start(e.tb, tg.addr)
	tl, other := tg.tools(p.Addr())
	if tg.viaProxy != nil {
		tl, other = tg.viaProxy(p)
	}
	flags := []string{"-hold", "1m", "-stubborn"}
	if peer {
		tl, flags = other, flags[:2]
	}
	key := e.key("loss")
	pr, err := startStamped(tl.cmd(key, lossTTL, e.stampArgs(flags...)...))
	if err != nil {
		e.tb.Fatal(err)
	}
	defer pr.kill()
	dw, err := watchDeath(pr.child)
	if err != nil {
		e.tb.Fatal(err)
	}
	time.Sleep(lossTTL / 2)
	p.Hold(netproxy.Both)
	held := time.Now()
	died, dead := dw.wait(time.Until(p.Traffic(netproxy.Up).Last.Add(lossTTL + time.Second)))
	// The server cannot have read the last request before it was
	// forwarded, and counts the TTL from when it did.
	expiry := p.Traffic(netproxy.Up).Last.Add(lossTTL)
	if !dead {
		return cut{overlap: e.takenOver(tg, peer, key)}
	}
	p.Heal() // let the tool give up the lock and exit
	return cut{dead: true, toDeath: died.Sub(held), margin: expiry.Sub(died), code: pr.exitCode()}
}

// takenOver tells whether another contender, speaking to the server
// directly, gets the lock on key within a second.
func (e *env) takenOver(tg target, peer bool, key string) bool {
	tl := tg.lockrun
	if peer {
		tl = tg.peer
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	argv := tl.cmd(key, lossTTL, "true")
	return exec.CommandContext(ctx, argv[0], argv[1:]...).Run() == nil
}
