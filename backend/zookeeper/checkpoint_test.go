package zookeeper

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/zktest"
)

func TestCheckpointConformance(t *testing.T) {
	p := &proxied{srv: zktest.Start(t), by: map[*Backend]*netproxy.Proxy{}}
	backendtest.RunCheckpoints(t, backendtest.Harness{Open: p.open, Crash: p.crash, TTL: time.Second})
}
