package bench

import (
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// workers is how many contenders loop on one key in the throughput
// measure.
const workers = 4

// throughput counts the runs of `true` completed per second on one key by
// workers contenders that each start the tool again as soon as it ends,
// lockrun and the peer in alternate rounds.
func (e *env) throughput(tgs []target) *table {
	rounds, span := e.samplesOf(3), 2*time.Second
	t := &table{
		title: "3. Contended throughput: " + fmt.Sprint(workers) + " contenders × one key × `true`",
		note: fmt.Sprintf("Runs completed per second, median of %d rounds of %v per tool, lockrun and the peer in turn; "+
			"each contender starts the tool again as soon as it exits.", rounds, span),
		head: []string{"backend", "peer", "peer runs/s", "lockrun runs/s", "lockrun / peer"},
	}
	for _, tg := range tgs {
		tools := []tool{tg.lockrun, tg.peer}
		rates := make([][]float64, len(tools))
		for round := range rounds {
			for i := range tools {
				j := (i + round) % len(tools)
				rates[j] = append(rates[j], e.runsPerSecond(tools[j], span))
			}
		}
		lr, peer := median(rates[0]), median(rates[1])
		t.add(tg.name, "`"+tg.peer.name+"`", num(round1(peer)), num(round1(lr)), ratio(lr, peer))
	}
	return t
}

// runsPerSecond has the workers run tl on a new key for span, and counts
// the runs that ended within it. It waits for the runs still going.
func (e *env) runsPerSecond(tl tool, span time.Duration) float64 {
	key := e.key("throughput")
	argv := tl.cmd(key, 0, "true")
	deadline := time.Now().Add(span)
	var done atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
					e.tb.Error(describe(argv, err))
					return
				}
				if time.Now().Before(deadline) {
					done.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(done.Load()) / span.Seconds()
}

// median is the lower median of v; 0 when empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	return s[(len(s)-1)/2]
}
