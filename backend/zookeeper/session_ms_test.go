package zookeeper

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/zktest"
)

// ZooKeeper counts session timeouts in whole milliseconds and the client
// truncates the one asked for: a TTL (or tick_time) with a fraction of a
// millisecond was granted a session a little short of TTL + tick, and the
// lock refused as if maxSessionTimeout were too low (exit 78).
func TestSubMillisecondTTLGetsItsSession(t *testing.T) {
	b := openTest(t, zktest.URL(zktest.Start(t).Addr()))
	for _, ttl := range []time.Duration{1000500 * time.Microsecond, time.Second + time.Nanosecond} {
		o := opts("h", false)
		o.TTL = ttl
		l, err := b.Acquire(t.Context(), "sub-ms", o)
		if err != nil {
			t.Fatalf("Acquire with ttl %v: %v", ttl, err)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}
