package heartbeat

import (
	"strings"
	"testing"
	"time"
)

func TestNewPolicyDefaults(t *testing.T) {
	p, err := NewPolicy(30 * time.Second)
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
		ttl      time.Duration
		settings []Setting
		want     string
	}{
		{0, nil, "must be positive"},
		{-time.Second, nil, "must be positive"},
		{30 * time.Second, []Setting{WithInterval(time.Millisecond)}, "too short"},
		{30 * time.Second, []Setting{WithGrace(-time.Second)}, "must not be negative"},
		// 20s + 10s + margin T/20 + headroom 2s < 0.99·T from T = 34.043s.
		{30 * time.Second, []Setting{WithInterval(20 * time.Second), WithGrace(10 * time.Second)}, "use a ttl of at least 34.043s"},
		{3 * time.Second, []Setting{WithGrace(5 * time.Second)}, "use a ttl of at least"},
		// With the defaults that scale with the TTL, 200ms is not enough.
		{200 * time.Millisecond, nil, "use a ttl of at least 225ms"},
		// Past a year the backends' own arithmetic (ns + drift, ms, etcd's
		// lease limit) overflowed: Redis, Redlock and PostgreSQL granted
		// leases that had expired before the command started.
		{MaxTTL + time.Millisecond, nil, "use at most 8760h"},
		{1<<63 - 1, nil, "use at most 8760h"},
	}
	for _, c := range cases {
		_, err := NewPolicy(c.ttl, c.settings...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewPolicy(%v, ...) = %v, want an error containing %q", c.ttl, err, c.want)
		}
	}
}

// The advice must be right: the TTL it names works, a millisecond less
// does not.
func TestMinimalTTLAdviceIsExact(t *testing.T) {
	for _, settings := range [][]Setting{nil, {WithGrace(5 * time.Second)}, {WithInterval(time.Second), WithGrace(0)}} {
		least := minTTL(settings)
		if _, err := NewPolicy(least, settings...); err != nil {
			t.Errorf("advised ttl %v fails: %v", least, err)
		}
		if _, err := NewPolicy(least-time.Millisecond, settings...); err == nil {
			t.Errorf("ttl %v works, below the advised %v", least-time.Millisecond, least)
		}
	}
}

func TestShortTTLDefaultsAreSafe(t *testing.T) {
	for _, ttl := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 10 * time.Second, time.Hour} {
		if _, err := NewPolicy(ttl); err != nil {
			t.Errorf("defaults for ttl %v rejected: %v", ttl, err)
		}
	}
}
