package etcd

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

func TestSemaphores(t *testing.T) {
	srv := etcdtest.Start(t)
	backendtest.RunSemaphores(t, backendtest.Operators{
		Harness: backendtest.Harness{
			Open: func(t *testing.T) backend.Backend { return openTest(t, srv.URL()) },
			TTL:  time.Second,
		},
		RenewedResolution: time.Second,
		ExpiryResolution:  time.Second,
	})
}
