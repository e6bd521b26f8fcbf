package redistest

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

// Client is a plain client of s, for a test to look at and tamper with
// the keys behind the backend's back; it is closed when the test ends.
func (s *Server) Client(t testing.TB) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}
