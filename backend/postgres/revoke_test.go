package postgres

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/pgtest"
)

func TestRevoke(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	backendtest.RunRevoke(t, backendtest.Operators{Harness: backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, raw) },
		TTL:  time.Second,
	}})
}
