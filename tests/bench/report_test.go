package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPercentilesAreMeasuredValues(t *testing.T) {
	var s samples
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{0: time.Millisecond, 50: 50 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond} {
		if got := s.pct(p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if got := (samples{}).p50(); got != 0 {
		t.Errorf("p50 of nothing = %v", got)
	}
}

func TestTableIsMarkdown(t *testing.T) {
	tb := &table{title: "1. T", note: "what", head: []string{"a", "b"}}
	tb.add("1", ms(1500*time.Microsecond))
	tb.add("2", ms(2*time.Second))
	var out strings.Builder
	tb.write(&out)
	want := "### 1. T\n\nwhat\n\n| a | b |\n| --- | --- |\n| 1 | 1.50 ms |\n| 2 | 2.00 s |\n\n"
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestDrainedChainGivesHandOffsAndWakeUpsPerHandOff(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	var lines strings.Builder
	queued := map[int]int64{}
	for i := range 4 { // commands 1 ms long, 2 ms apart; waiter i woke 3i+5 times before its turn
		start := int64(i) * 3e6
		pid := 100 + i
		queued[pid] = 10
		fmt.Fprintf(&lines, "%d %d %d %d %d\n", start, start+1e6, 1000+i, pid, 15+3*i)
	}
	if err := os.WriteFile(log, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := drained(log, 3, 7, queued)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.handoffs) != 3 || c.handoffs.p50() != 2*time.Millisecond || c.requests != 7 {
		t.Errorf("chain = %+v, want 3 hand-offs of 2ms and 7 requests", c)
	}
	if c.slope < 2.99 || c.slope > 3.01 {
		t.Errorf("slope = %v, want 3 wake-ups per hand-off", c.slope)
	}
	if _, err := drained(log, 4, 0, queued); err == nil {
		t.Error("a chain with a missing command was accepted")
	}
}
