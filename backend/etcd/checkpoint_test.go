package etcd

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

func TestCheckpointConformance(t *testing.T) {
	srv := etcdtest.Start(t)
	backendtest.RunCheckpoints(t, backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return openTest(t, srv.URL()) },
		TTL:  time.Second,
	})
}
