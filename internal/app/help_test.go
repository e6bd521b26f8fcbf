package app

import (
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestRunHelpNamesEveryExitStatus: the EXIT STATUS of `lockrun run --help`
// is the table users read; every status lockrun itself returns must be in
// it (DESIGN: one table, in --help and in the README).
func TestRunHelpNamesEveryExitStatus(t *testing.T) {
	_, table, ok := strings.Cut(runDescription, "EXIT STATUS:")
	if !ok {
		t.Fatal("run's description has no EXIT STATUS section")
	}
	codes := []int{ExitUsage, ExitUnavailable, ExitSoftware, ExitBusy, ExitLost, ExitNoPerm, ExitConfig, ExitMaxRun, ExitCannotExec, ExitNotFound}
	for _, c := range codes {
		if !strings.Contains(table, " "+strconv.Itoa(c)+" ") {
			t.Errorf("run --help EXIT STATUS does not name exit status %d", c)
		}
	}
}

// TestBackendFlagNamesEveryScheme: --backend's help and the no-scheme
// message list the backends lockrun opens.
func TestBackendFlagNamesEveryScheme(t *testing.T) {
	var usage string
	for _, f := range runCommand(&state{}).Flags {
		if f.Names()[0] == "backend" {
			usage = f.String()
		}
	}
	_, err := (&state{}).openBackend(context.Background(), "no-scheme")
	for _, scheme := range []string{"file://", "redis://", "etcd://", "postgres://", "zk://", "redlock://"} {
		if !strings.Contains(usage, scheme) {
			t.Errorf("--backend help %q does not name %s", usage, scheme)
		}
		if err == nil || !strings.Contains(err.Error(), scheme) {
			t.Errorf("no-scheme error %v does not name %s", err, scheme)
		}
	}
}
