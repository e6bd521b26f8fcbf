package redlock

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockrun/lockrun/backend"
)

// `lockrun init` on a Redlock set loads the fence functions on every
// master, and says which master it could not reach.
func TestInitLoadsTheFenceOnEveryMaster(t *testing.T) {
	servers := masters(t, 3)
	b := open(t, urlOf(servers))
	if err := b.Init(t.Context()); err != nil {
		t.Fatalf("init: %v", err)
	}
	for _, s := range servers {
		c := s.Client(t)
		if v, err := c.FCall(t.Context(), "lockrun_fence", []string{"fence:x"}, "7").Result(); err != nil || v != "7" {
			t.Errorf("master %s after init: lockrun_fence = %v, %v; want 7", s.Addr(), v, err)
		}
	}
	down := servers[1].Addr()
	servers[1].Stop()
	err := b.Init(t.Context())
	if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), down) {
		t.Errorf("init with master %s down: %v; want it named, unavailable", down, err)
	}
}
