package backendtest

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// ClockSkewer is a lease that expires on its store's wall clock and
// measured that clock against the local one at the grant.
type ClockSkewer interface {
	ClockSkew() (time.Duration, bool)
}

// WantNoSkew fails t unless l measured its store's clock and found it
// within the grant's round trip of the local one, as a server on this host
// must be.
func WantNoSkew(t testing.TB, what string, l backend.Lease) {
	t.Helper()
	s, ok := l.(ClockSkewer)
	if !ok {
		t.Fatalf("%s: the lease (%T) has no ClockSkew", what, l)
	}
	if d, ok := s.ClockSkew(); !ok || d != 0 {
		t.Errorf("%s: ClockSkew() = %v, %v against a server on this host; want 0, true", what, d, ok)
	}
}
