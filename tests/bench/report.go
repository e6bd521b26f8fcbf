// Package bench measures lockrun against the tools users would pick instead
// (flock(1), a redis-cli SET NX snippet, etcdctl lock), on every backend,
// in one run: the peer is measured in the same run as lockrun, interleaved
// round-robin, so that the noise of a shared machine hits both, and every
// figure is a median or a percentile next to a baseline taken in that run.
// BenchmarkReport drives it and prints one markdown table per measure:
//
//	go test -run '^$' -bench Report -benchtime 1x ./cmd/lockrun/bench
//
// The commands run under the locks are stamp (./stamp), which records
// CLOCK_REALTIME at its start and end, so that a hand-off (one command's end
// to the next one's start) is timed the same way whichever tool passed the
// lock on.
package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// samples are measured durations.
type samples []time.Duration

// pct is the p-th percentile (0 < p ≤ 100) by nearest rank: a value that
// was measured, never an interpolation. Zero when there is no sample.
func (s samples) pct(p float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	rank := int(p/100*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func (s samples) p50() time.Duration { return s.pct(50) }
func (s samples) p99() time.Duration { return s.pct(99) }

// ms formats d in milliseconds with two decimals (in seconds from one
// second up), "—" for zero.
func ms(d time.Duration) string {
	switch {
	case d == 0:
		return "—"
	case d >= time.Second || d <= -time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

// ratio formats a/b as "×1.23", "—" when b is zero.
func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("×%.2f", a/b)
}

// durRatio is ratio for durations.
func durRatio(a, b time.Duration) string { return ratio(float64(a), float64(b)) }

// mib formats a size in kB (as /proc reports it) in MiB, or in KiB below
// one MiB.
func mib(kb int64) string {
	switch {
	case kb <= 0:
		return "—"
	case kb < 1024:
		return fmt.Sprintf("%d KiB", kb)
	}
	return fmt.Sprintf("%.1f MiB", float64(kb)/1024)
}

// num formats a count or a rate with at most one decimal.
func num(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprint(int64(v))
	}
	return fmt.Sprintf("%.1f", v)
}

// table is one markdown table of the report.
type table struct {
	title string // the heading above it
	note  string // what it measures and how, one paragraph
	head  []string
	rows  [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// write renders the table as markdown under a level-3 heading.
func (t *table) write(w io.Writer) {
	fmt.Fprintf(w, "### %s\n\n", t.title)
	if t.note != "" {
		fmt.Fprintf(w, "%s\n\n", t.note)
	}
	line := func(cells []string) {
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	line(t.head)
	sep := make([]string, len(t.head))
	for i := range sep {
		sep[i] = "---"
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
	fmt.Fprintln(w)
}
