package redlock

import (
	"os"
	"testing"

	"github.com/lockrun/lockrun/backend/redis"
)

// TestMain silences go-redis's own log of failed dials: the tests stop
// masters on purpose, and every failure reaches them as an error.
func TestMain(m *testing.M) {
	redis.DisableClientLogs()
	os.Exit(m.Run())
}
