package faults

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Result counts what went wrong in one run of one case on one backend.
type Result struct {
	Backend, Case    string
	Runs             int // commands that started
	Overlaps         int // pairs of runs: the older alive when the newer wrote
	StaleAccepted    int // writes accepted with a token older than a started run's
	LateKills        int // pairs of runs: the older alive when the newer was granted
	TokenRegressions int // grants whose token did not exceed the previous one
	LostExits        int // lockruns that exited 76
	Refusals         int // lockruns that gave a late grant back
	Orphans          int // runs whose processes outlived the case
	Failures         []string
}

// analyze computes a Result from what the oracle and the fleet saw.
func analyze(o *Oracle, attempts []Attempt) Result {
	lives, writes := o.snapshot()
	var r Result
	r.Runs = len(lives)
	r.Overlaps, r.LateKills = o.counts()
	for _, l := range lives {
		if l.end.IsZero() {
			r.Orphans++
		}
	}
	for _, w := range writes {
		if w.accepted && startedAbove(lives, w.token, w.at) {
			r.StaleAccepted++
		}
	}
	grants := make([]Attempt, 0, len(attempts))
	for _, a := range attempts {
		if a.Exit == 76 {
			r.LostExits++
		}
		if refused(a) {
			r.Refusals++
		}
		if a.Token != 0 {
			grants = append(grants, a)
		}
	}
	sort.Slice(grants, func(i, j int) bool { return grants[i].Acquired.Before(grants[j].Acquired) })
	for i := 1; i < len(grants); i++ {
		if grants[i].Token <= grants[i-1].Token {
			r.TokenRegressions++
		}
	}
	return r
}

// refused tells whether lockrun gave back a grant that came too late.
func refused(a Attempt) bool {
	for _, l := range a.Log {
		if strings.Contains(l, "too late to run") {
			return true
		}
	}
	return false
}

// startedAbove tells whether a run with a token above token had started
// before at.
func startedAbove(lives []life, token uint64, at time.Time) bool {
	for _, l := range lives {
		if l.token > token && l.start.Before(at) {
			return true
		}
	}
	return false
}

func (r *Result) failf(format string, a ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, a...))
}

// printTable writes results as a markdown table.
func printTable(w io.Writer, results []Result) {
	fmt.Fprintln(w, "| backend | case | runs | overlaps | stale_accepted | late_kills | token_regressions | lost_exits | refusals | orphans | verdict |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		verdict := "ok"
		if len(r.Failures) > 0 {
			verdict = "FAIL: " + strings.Join(r.Failures, "; ")
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", r.Backend, r.Case, r.Runs,
			r.Overlaps, r.StaleAccepted, r.LateKills, r.TokenRegressions, r.LostExits, r.Refusals, r.Orphans, verdict)
	}
}

// summary is the one line scripts read.
func summary(results []Result) string {
	var t Result
	for _, r := range results {
		t.Runs += r.Runs
		t.Overlaps += r.Overlaps
		t.StaleAccepted += r.StaleAccepted
		t.LateKills += r.LateKills
		t.LostExits += r.LostExits
	}
	return fmt.Sprintf("faults: runs=%d overlaps=%d stale_accepted=%d late_kills=%d lost_exits=%d",
		t.Runs, t.Overlaps, t.StaleAccepted, t.LateKills, t.LostExits)
}
