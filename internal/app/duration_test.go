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
