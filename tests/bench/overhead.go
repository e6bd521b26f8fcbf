package bench

import "strings"

// overhead times one whole uncontended run of `true`: bare, under the
// peer, and under lockrun, round-robin (the order turns every round), so
// that the machine's noise falls on all three alike.
func (e *env) overhead(tgs []target) *table {
	runs := e.samplesOf(60)
	if e.runs > 0 {
		runs = e.runs
	}
	t := &table{
		title: "1. Whole-process overhead: one uncontended run of `true`",
		note: "Wall time from fork to exit, p50 (p99) of " + num(float64(runs)) + " runs of each command, " +
			"taken round-robin with bare `true` in the same run. lockrun runs `lockrun run -b URL KEY -- true`, as a crontab would.",
		head: []string{"backend", "bare `true`", "peer", "peer", "lockrun", "lockrun − `true`", "lockrun / peer"},
	}
	for _, tg := range tgs {
		key := e.key("overhead")
		cmds := [][]string{{"true"}, tg.peer.once(key+"-peer", "true"), tg.lockrun.once(key, "true")}
		times := make([]samples, len(cmds))
		for round := range runs {
			for i := range cmds {
				j := (i + round) % len(cmds)
				d, err := timed(cmds[j])
				if err != nil {
					e.tb.Fatal(err)
				}
				times[j] = append(times[j], d)
			}
		}
		bare, peer, lr := times[0], times[1], times[2]
		t.add(tg.name, ms(bare.p50()), "`"+tg.peer.name+"`", p50p99(peer), p50p99(lr),
			ms(lr.p50()-bare.p50()), durRatio(lr.p50(), peer.p50()))
	}
	return t
}

// p50p99 formats "p50 (p99)".
func p50p99(s samples) string {
	return ms(s.p50()) + " (" + strings.TrimSuffix(ms(s.p99()), " ms") + ")"
}
