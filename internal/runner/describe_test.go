package runner

import (
	"syscall"
	"testing"
)

// describe names the signal as the user would look it up: the watchdog's
// death was reported as "killed by killed".
func TestDescribeNamesTheSignal(t *testing.T) {
	for ws, want := range map[syscall.WaitStatus]string{
		syscall.WaitStatus(syscall.SIGKILL): "killed by SIGKILL",
		syscall.WaitStatus(syscall.SIGSEGV): "killed by SIGSEGV",
		syscall.WaitStatus(3 << 8):          "exit status 3",
	} {
		if got := describe(ws); got != want {
			t.Errorf("describe(%#x) = %q, want %q", uint32(ws), got, want)
		}
	}
}
