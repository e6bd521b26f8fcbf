package runner

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// signalName is sig as people write it, "SIGTERM", rather than Go's
// description, "terminated".
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if name := unix.SignalName(s); name != "" {
			return name
		}
	}
	return sig.String()
}
