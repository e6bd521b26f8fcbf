package runner

import (
	"os"
	"testing"

	"github.com/lockrun/lockrun/internal/watchdog"
)

// TestMain makes the test binary a watchdog when started as testWatchdog.
func TestMain(m *testing.M) {
	if len(os.Args) >= 2 && os.Args[1] == watchdog.Subcommand {
		if err := watchdog.Main(os.Stdin, os.Args[2:]); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// testWatchdog is this test binary as the runner's watchdog.
func testWatchdog(t *testing.T) *watchdog.Program {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return &watchdog.Program{Path: self, Args: []string{watchdog.Subcommand}}
}
