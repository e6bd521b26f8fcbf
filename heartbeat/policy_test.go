package heartbeat

import (
	"strings"
	"testing"
	"time"
)

func TestNewPolicyDefaults(t *testing.T) {
	p, err := NewPolicy(30*time.Second, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := Policy{TTL: 30 * time.Second, Interval: 10 * time.Second, Grace: 5 * time.Second, Margin: 1500 * time.Millisecond, Drift: 0.01}
	if p != want {
		t.Errorf("NewPolicy(30s) = %+v, want %+v", p, want)
	}
	// D = 29.7s, kill at 28.2s, term at 23.2s.
	s := time.Unix(1000, 0)
	if got := p.TermAt(s).Sub(s); got != 23200*time.Millisecond {
		t.Errorf("TermAt = +%v, want +23.2s", got)
	}
	if got := p.KillAt(s).Sub(s); got != 28200*time.Millisecond {
		t.Errorf("KillAt = +%v, want +28.2s", got)
	}
}

func TestNewPolicyRejectsUnsafeSettings(t *testing.T) {
	cases := []struct {
		ttl, hb, grace time.Duration
		want           string
	}{
		{0, 0, 0, "must be positive"},
		{-time.Second, 0, 0, "must be positive"},
		{30 * time.Second, time.Millisecond, 0, "too short"},
		{30 * time.Second, 0, -time.Second, "must not be negative"},
		{30 * time.Second, 20 * time.Second, 10 * time.Second, "raise the ttl above 31.8"},
		{3 * time.Second, 0, 5 * time.Second, "leave no time to renew"},
	}
	for _, c := range cases {
		_, err := NewPolicy(c.ttl, c.hb, c.grace)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewPolicy(%v, %v, %v) = %v, want an error containing %q", c.ttl, c.hb, c.grace, err, c.want)
		}
	}
}

func TestShortTTLDefaultsAreSafe(t *testing.T) {
	for _, ttl := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 10 * time.Second, time.Hour} {
		if _, err := NewPolicy(ttl, 0, 0); err != nil {
			t.Errorf("defaults for ttl %v rejected: %v", ttl, err)
		}
	}
}
