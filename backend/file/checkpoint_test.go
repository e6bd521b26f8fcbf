package file

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

func TestCheckpointConformance(t *testing.T) {
	dir := t.TempDir()
	backendtest.RunCheckpoints(t, backendtest.Harness{
		Open: func(t *testing.T) backend.Backend {
			b, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
		TTL: time.Second,
	})
}
