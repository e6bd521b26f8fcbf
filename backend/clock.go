package backend

import "time"

// Skew is how far a store's clock is at least ahead of the local wall
// clock (negative: behind), from one request: server is the store's clock
// as it answered, sent and received the local wall clock just before the
// request went out and just after its answer came. A server time within
// the round trip is consistent with clocks that agree, and gives 0; the
// request's share of the round trip is unknown, so a reading outside it
// counts only from the nearer end.
func Skew(sent, received, server time.Time) time.Duration {
	switch s, r := sent.Round(0), received.Round(0); {
	case server.Before(s):
		return server.Sub(s)
	case server.After(r):
		return server.Sub(r)
	}
	return 0
}
