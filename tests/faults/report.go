package faults

import (
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Result counts what went wrong in one run of one case on one backend.
type Result struct {
	Backend, Case    string
	Runs             int // commands that started
	Overlaps         int // pairs of runs: the older alive when the newer wrote (for --limit N: with N older ones)
	StaleAccepted    int // writes the fenced store accepted from a run after another run had its token
	StaleRejected    int // writes the fenced store refused: their token was below one it had accepted
	LateKills        int // pairs of runs: the older alive when the newer was granted (for --limit N: with N older ones)
	Peak             int // the most commands seen alive at once
	TokenRegressions int // grants whose token did not exceed the previous one
	LostExits        int // lockruns that exited 76
	Refusals         int // lockruns that gave a late grant back
	Orphans          int // runs whose processes outlived the case
	Failures         []string
}

// analyze computes a Result from what the oracle and the fleet saw.
func analyze(o *Oracle, attempts []Attempt) Result {
	var r Result
	lives := o.snapshot()
	overlaps, late, peak, store := o.counts()
	r.Runs, r.Overlaps, r.LateKills, r.Peak = len(lives), overlaps, late, peak
	r.StaleAccepted, r.StaleRejected = store.staleAccepted, store.staleRejected
	for _, l := range lives {
		if l.end.IsZero() {
			r.Orphans++
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
	if o.limit > 1 {
		r.TokenRegressions = sharedRegressions(grants)
		return r
	}
	sort.Slice(grants, func(i, j int) bool { return grants[i].Acquired.Before(grants[j].Acquired) })
	for i := 1; i < len(grants); i++ {
		if grants[i].Token <= grants[i-1].Token {
			r.TokenRegressions++
		}
	}
	return r
}

// sharedRegressions counts the grants of a semaphore whose token did not
// exceed one granted before: their holders run side by side and log their
// grants in any order, so a grant is compared only with those that a
// lockrun had logged before this one's lockrun even started (the server
// had issued them before it was asked), and with every other grant for a
// repeated token.
func sharedRegressions(grants []Attempt) int {
	n := 0
	for i, y := range grants {
		for j, x := range grants {
			if i != j && (x.Token == y.Token && j < i || x.Acquired.Before(y.Started) && y.Token <= x.Token) {
				n++
				break
			}
		}
	}
	return n
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

func (r *Result) failf(format string, a ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, a...))
}

// printTable writes results as a markdown table.
func printTable(w io.Writer, results []Result) {
	fmt.Fprintln(w, "| backend | case | runs | overlaps | stale_accepted | stale_rejected | late_kills | token_regressions | lost_exits | refusals | orphans | verdict |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range results {
		verdict := "ok"
		if len(r.Failures) > 0 {
			verdict = "FAIL: " + strings.Join(r.Failures, "; ")
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", r.Backend, r.Case, r.Runs,
			r.Overlaps, r.StaleAccepted, r.StaleRejected, r.LateKills, r.TokenRegressions, r.LostExits, r.Refusals, r.Orphans, verdict)
	}
}

// provenance is the line above the table, for the docs made from it: when
// the run started, for how long each case ran, on which commit (with
// "-dirty" when the tracked files differ from it), cores and kernel.
func provenance(started time.Time, d time.Duration, hog bool) string {
	commit := "unknown"
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		commit = strings.TrimSpace(string(out))
		if out, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(out) > 0 {
			commit += "-dirty"
		}
	}
	kernel := "unknown"
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		kernel = unix.ByteSliceToString(u.Release[:])
	}
	pressure := ""
	if hog {
		pressure = ", every case beside a busy loop on every core"
	}
	return fmt.Sprintf("Fault run started %s, %v per case (longer where a case needs it), at commit `%s`, %d cores, Linux %s%s.",
		started.UTC().Format("Mon Jan 2 15:04 MST 2006"), d, commit, runtime.NumCPU(), kernel, pressure)
}

// summary is the one line scripts read.
func summary(results []Result) string {
	var t Result
	for _, r := range results {
		t.Runs += r.Runs
		t.Overlaps += r.Overlaps
		t.StaleAccepted += r.StaleAccepted
		t.StaleRejected += r.StaleRejected
		t.LateKills += r.LateKills
		t.LostExits += r.LostExits
	}
	return fmt.Sprintf("faults: runs=%d overlaps=%d stale_accepted=%d stale_rejected=%d late_kills=%d lost_exits=%d",
		t.Runs, t.Overlaps, t.StaleAccepted, t.StaleRejected, t.LateKills, t.LostExits)
}
