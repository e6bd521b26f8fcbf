package redlock

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// errTokenRange means the counters have reached the largest token: the
// next one cannot be issued exactly.
var errTokenRange = fmt.Errorf("%w: token counter at its maximum", errMalformed)

// parseToken reads a decimal token as the scripts store it.
func parseToken(s string) (backend.Token, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: token %q", errMalformed, s)
	}
	return backend.Token(n), nil
}

// nextToken is the token of a new grant: above the highest counter that
// the masters reported (a majority at least, which shares a master with
// the majority that took every earlier grant), and never below the wall
// clock in microseconds, the local one or any master's (so that it still
// grows when masters lost their counters).
func nextToken(highest backend.Token, clocks []backend.Token, now time.Time) (backend.Token, error) {
	if highest == math.MaxUint64 {
		return 0, errTokenRange
	}
	t := max(highest+1, backend.Token(now.UnixMicro()))
	for _, c := range clocks {
		t = max(t, c)
	}
	return t, nil
}
