package bench

import (
	"fmt"
	"time"
)

// beforeAfter measures the lockrun under test against another lockrun
// binary (an older build), interleaved in the same run as the peers are,
// so that a change's effect is not lost in the noise between two runs.
func (e *env) beforeAfter(tgs []target) *table {
	rounds := e.samplesOf(30)
	t := &table{
		title: "0. This build of lockrun against the baseline build",
		note: fmt.Sprintf("Medians, the two builds in turn: whole-process overhead (`true`, %d runs each), hand-off "+
			"(%d rounds of %d queued waiters), contended throughput (%d contenders, %d rounds of 2s) and peak RSS "+
			"while holding a lock (lockrun + its watchdog).", rounds, rounds/3, queueLen, workers, e.samplesOf(3)),
		head: []string{"backend", "overhead", "hand-off p50", "runs/s", "peak RSS holding"},
	}
	for _, tg := range tgs {
		tools := []tool{lockrunWith(e.baseline, tg.lockrun.url, tg.lockrun.queued), tg.lockrun}
		over, hand := make([]samples, 2), make([]samples, 2)
		rates := make([][]float64, 2)
		for round := range rounds {
			for i := range tools {
				j := (i + round) % 2
				d, err := timed(tools[j].once(e.key("baseline"), "true"))
				if err != nil {
					e.tb.Fatal(err)
				}
				over[j] = append(over[j], d)
				if round%3 == 0 {
					c, err := e.runChain(tools[j], queueLen, nil, nil)
					if err != nil {
						e.tb.Fatal(err)
					}
					hand[j] = append(hand[j], c.handoffs...)
				}
				if round < e.samplesOf(3) {
					rates[j] = append(rates[j], e.runsPerSecond(tools[j], 2*time.Second))
				}
			}
		}
		rss := make([]string, 2)
		for j, tl := range tools {
			holder, watchdog := e.peakRSS(tl)
			rss[j] = mib(holder) + " + " + mib(watchdog)
		}
		t.add(tg.name, ms(over[0].p50())+" → "+ms(over[1].p50()), ms(hand[0].p50())+" → "+ms(hand[1].p50()),
			num(round1(median(rates[0])))+" → "+num(round1(median(rates[1]))), rss[0]+" → "+rss[1])
	}
	return t
}
