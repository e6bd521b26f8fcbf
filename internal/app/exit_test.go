package app

import (
	"fmt"
	"testing"

	"github.com/lockrun/lockrun/backend"
)

func TestExitCodeOfAConfigurationError(t *testing.T) {
	if code := exitCode(fmt.Errorf("redis: loading functions: %w", backend.ErrConfig)); code != 78 {
		t.Errorf("ErrConfig exits %d, want 78 (EX_CONFIG)", code)
	}
}
