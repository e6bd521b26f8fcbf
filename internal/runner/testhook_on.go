//go:build testhooks

package runner

import (
	"os"
	"syscall"
)

// freezeBeforeExec stops lockrun (SIGSTOP, as a frozen cgroup or a VM
// steal would) at the latest point between the grant and the exec of the
// command, when LOCKRUN_TESTHOOK=freeze-before-exec: the worst window for
// a command started after its deadline. Only binaries built with the
// build tag testhooks have it; the fault harness and tests/e2e use it.
func freezeBeforeExec() {
	if os.Getenv("LOCKRUN_TESTHOOK") == "freeze-before-exec" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	}
}
