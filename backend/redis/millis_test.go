package redis

import (
	"testing"
	"time"
)

// millis rounded up by adding 999999ns first, which overflowed for the
// largest TTLs into PX 1: a lease that expired a millisecond after the
// grant.
func TestMillisDoesNotOverflow(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		1<<63 - 1:            9223372036855,
		time.Millisecond:     1,
		time.Millisecond + 1: 2,
		-time.Second:         1,
	} {
		if got := millis(d); got != want {
			t.Errorf("millis(%d) = %d, want %d", d, got, want)
		}
	}
}
