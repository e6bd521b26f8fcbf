package backend

import "time"

// ErrTokenRange means a key's next fencing token cannot be issued exactly:
// its counter is at the largest value the store can hold (or keep exact).
// Issuing it anyway would repeat or wrap a token, so the grant fails
// instead. errors.Is(err, ErrUnavailable) is true of it too: lockrun exits
// 69.
var ErrTokenRange error = tokenRangeError{}

type tokenRangeError struct{}

func (tokenRangeError) Error() string { return "the fencing token cannot grow any further" }

// Is makes errors.Is(ErrTokenRange, ErrUnavailable) true.
func (tokenRangeError) Is(target error) bool { return target == ErrUnavailable }

// ClockToken is t as a token: the wall clock in microseconds since the
// Unix epoch, the floor of every token a backend issues (0 before 1970).
func ClockToken(t time.Time) Token { return Token(max(t.UnixMicro(), 0)) }
