package memory

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

// The fake must keep the contract too, or the runner's tests prove nothing.
func TestConformance(t *testing.T) {
	store := New()
	backendtest.Run(t, backendtest.Harness{
		Open:  func(*testing.T) backend.Backend { return store },
		Crash: func(_ *testing.T, l backend.Lease) { store.Expire(l.(*lease).key) },
		TTL:   500 * time.Millisecond,
	})
}
