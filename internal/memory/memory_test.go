package memory

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

// The fake must keep the contract too, or the runner's tests prove nothing.
func harness() backendtest.Operators {
	store := New()
	return backendtest.Operators{Harness: backendtest.Harness{
		Open:  func(*testing.T) backend.Backend { return store },
		Crash: func(_ *testing.T, l backend.Lease) { store.ExpireLease(l) },
		TTL:   500 * time.Millisecond,
	}}
}

func TestConformance(t *testing.T) { backendtest.Run(t, harness().Harness) }

func TestOperators(t *testing.T) { backendtest.RunOperators(t, harness()) }

func TestSemaphores(t *testing.T) { backendtest.RunSemaphores(t, harness()) }

func TestRevoke(t *testing.T) { backendtest.RunRevoke(t, harness()) }
