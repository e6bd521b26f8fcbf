package redlock

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

func TestCheckpointConformance(t *testing.T) {
	raw := urlOf(masters(t, 3))
	backendtest.RunCheckpoints(t, backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, raw) },
		TTL:  time.Second,
	})
}
