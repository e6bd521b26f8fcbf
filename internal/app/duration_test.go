package app

import (
	"testing"
	"time"
)

func TestParseSeconds(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"10": 10 * time.Second, "0.5": 500 * time.Millisecond, "0": 0, "1m30s": 90 * time.Second,
		"300ms": 300 * time.Millisecond, "-1": -time.Second,
	} {
		if got, err := parseSeconds(in); err != nil || got != want {
			t.Errorf("parseSeconds(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ten", "10x", "NaN", "Inf", "1e300"} {
		if got, err := parseSeconds(in); err == nil {
			t.Errorf("parseSeconds(%q) = %v, want an error", in, got)
		}
	}
}

func TestNoticesAtGrowingIntervals(t *testing.T) {
	var got []time.Duration
	for at := nextNotice(0); len(got) < 9; at = nextNotice(at) {
		got = append(got, at)
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		16 * time.Minute, 32 * time.Minute, 64 * time.Minute, 124 * time.Minute}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("notices at %v, want %v", got, want)
		}
	}
}
