package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
)

// Cron on a fleet: two hosts run the same crontab entry (on the file
// backend, two users' crons of one machine), and their crons
// fire a little apart (clock skew, cron's jitter). The job takes far less
// than the skew. With --min-hold longer than the skew the job runs once
// per schedule, whichever host fires first; without it, the later host
// finds the lock free and runs the job again (the control case, which
// shows the test can tell). The host that ran the job exits as soon as
// the job ends, not when the minimum hold does.
func TestCronOnAFleetRunsOncePerSchedule(t *testing.T) {
	const (
		period  = 5 * time.Second // between two schedules
		skew    = time.Second     // host B's cron fires this much after A's, then before
		minHold = 3 * time.Second // above the skew (with room for a loaded host), below the period
		ticks   = 2
	)
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			url := srv.url(t)
			lockruntest.Binary(t) // built before the clock starts
			for _, hold := range []time.Duration{minHold, 0} {
				t.Run("min-hold="+hold.String(), func(t *testing.T) {
					t.Parallel()
					runs := filepath.Join(t.TempDir(), "runs")
					var wg sync.WaitGroup
					begin := time.Now()
					for tick := range ticks {
						first, second := "host-a", "host-b"
						if tick%2 == 1 {
							first, second = second, first
						}
						at := begin.Add(time.Duration(tick) * period)
						key := "nightly-report-" + hold.String() // the control must not meet the other's hold
						wg.Go(func() { cronFires(t, url, key, first, hold, runs, at, minHold) })
						wg.Go(func() { cronFires(t, url, key, second, hold, runs, at.Add(skew), minHold) })
					}
					wg.Wait()
					got := lines(t, runs)
					switch {
					case hold > 0 && len(got) != ticks:
						t.Errorf("--min-hold %v: the job ran %d times in %d schedules, want once each:\n%s", hold, len(got), ticks, strings.Join(got, "\n"))
					case hold == 0 && len(got) <= ticks:
						// Each host should run it (a loaded host may take
						// longer than the skew once): more than once per
						// schedule shows what --min-hold is for.
						t.Errorf("without --min-hold the job ran %d times in %d schedules; the later host should have run it again:\n%s", len(got), ticks, strings.Join(got, "\n"))
					}
				})
			}
		})
	}
}

// cronFires runs the fleet's crontab line as host at the time at: quiet
// and exit 0 when another host has the lock.
func cronFires(t *testing.T, url, key, host string, hold time.Duration, runs string, at time.Time, minHold time.Duration) {
	time.Sleep(time.Until(at))
	began := time.Now()
	r := run(t, envFor(url), "run", "-q", "--conflict-exit-code", "0", "--holder", host, "--min-hold", hold.String(), key,
		"--", "sh", "-c", `echo "$LOCKRUN_HOLDER $LOCKRUN_FENCING_TOKEN" >> "$1"; sleep 0.2`, "sh", runs)
	took := time.Since(began)
	if r.Code != 0 || r.Stderr != "" {
		t.Errorf("%s: exit %d, stderr %q; want 0 and silence, as cron needs", host, r.Code, r.Stderr)
	}
	if took >= minHold {
		t.Errorf("%s: lockrun took %v; it must exit when the job does, not wait out the %v minimum hold", host, took, minHold)
	}
}

// lines is the file's lines, none if it does not exist.
func lines(t *testing.T, path string) []string {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(b)), " ", "_"))
}
