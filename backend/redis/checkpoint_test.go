package redis

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

func TestCheckpointConformance(t *testing.T) {
	srv := redistest.Start(t)
	backendtest.RunCheckpoints(t, backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, srv.URL()) },
		TTL:  time.Second,
	})
}
