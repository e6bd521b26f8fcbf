package file

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

// The operator-facing suite that the server backends pass: holder records,
// List and the minimum hold.
func TestOperators(t *testing.T) {
	dir := t.TempDir()
	backendtest.RunOperators(t, backendtest.Operators{
		Harness: backendtest.Harness{
			Open: func(t *testing.T) backend.Backend {
				b, err := Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			TTL: time.Second,
		},
		// The record keeps milliseconds, and renewals show as the lock
		// file's modification time.
		RenewedResolution: 10 * time.Millisecond,
	})
}
