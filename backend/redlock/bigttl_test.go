package redlock

import (
	"testing"
	"time"
)

// A TTL near time.Duration's limit overflowed TTL + drift to a negative
// duration, which millis turned into PX 1: the lock expired a millisecond
// after the grant and a second run took it while the first still ran.
func TestHugeTTLStillHoldsTheLock(t *testing.T) {
	b := open(t, urlOf(masters(t, 3)))
	for _, ttl := range []time.Duration{2562047 * time.Hour, 1<<63 - 1} {
		l, err := b.Acquire(t.Context(), "huge", opts("first", ttl))
		if err != nil {
			t.Fatalf("Acquire with ttl %v: %v", ttl, err)
		}
		time.Sleep(20 * time.Millisecond)
		if other, err := b.Acquire(t.Context(), "huge", opts("second", time.Minute)); err == nil {
			other.Release(t.Context())
			t.Fatalf("ttl %v: a second holder took the lock 20ms after the first", ttl)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatalf("ttl %v: release: %v", ttl, err)
		}
	}
}

func TestMillisDoesNotOverflow(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		1<<63 - 1:            9223372036855,
		time.Millisecond:     1,
		time.Millisecond + 1: 2,
		2562047 * time.Hour:  9223369200000,
		-time.Second:         1,
	} {
		if got := millis(d); got != want {
			t.Errorf("millis(%d) = %d, want %d", d, got, want)
		}
	}
}
