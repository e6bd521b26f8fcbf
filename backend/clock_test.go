package backend

import (
	"testing"
	"time"
)

func TestSkewCountsFromTheNearerEndOfTheRoundTrip(t *testing.T) {
	sent := time.Unix(1000, 0)
	received := sent.Add(10 * time.Millisecond)
	for _, c := range []struct {
		server time.Time
		want   time.Duration
	}{
		{sent, 0},
		{sent.Add(5 * time.Millisecond), 0},
		{received, 0},
		{received.Add(3 * time.Second), 3 * time.Second},
		{sent.Add(-2 * time.Second), -2 * time.Second},
	} {
		if got := Skew(sent, received, c.server); got != c.want {
			t.Errorf("Skew(sent, sent+10ms, sent%+v) = %v, want %v", c.server.Sub(sent), got, c.want)
		}
	}
}
