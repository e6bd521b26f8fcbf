package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The watchdog starts beside every command and lives as long as it: it
// must stay small, so it links the standard library and these alone (no
// CLI, no backend client, no gRPC, whose package init and memory every
// run would pay for again).
var allowed = map[string]bool{
	"github.com/lockrun/lockrun/cmd/lockrun-watchdog": true,
	"github.com/lockrun/lockrun/internal/watchdog":    true,
	"github.com/lockrun/lockrun/internal/clock":       true,
	"github.com/lockrun/lockrun/internal/procfs":      true,
	"golang.org/x/sys/unix":                           true,
}

func TestLinksOnlyTheWatchdogAndTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list named no package, not even this one")
	}
	for _, dep := range deps {
		if !allowed[dep] {
			t.Errorf("lockrun-watchdog links %s", dep)
		}
	}
}
