package backend

import (
	"fmt"
	"time"
)

// ErrTokenRange means a key's next fencing token cannot be issued exactly:
// its counter is at the largest value the store can hold (or keep exact).
// Issuing it anyway would repeat or wrap a token, so the grant fails
// instead. It wraps ErrUnavailable: lockrun exits 69.
var ErrTokenRange = fmt.Errorf("%w: the fencing token cannot grow any further", ErrUnavailable)

// ClockToken is t as a token: the wall clock in microseconds since the
// Unix epoch, the floor of every token a backend issues (0 before 1970).
func ClockToken(t time.Time) Token { return Token(max(t.UnixMicro(), 0)) }
