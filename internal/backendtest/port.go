package backendtest

import (
	"net"
	"testing"
)

// FreePort returns a loopback TCP port that was free a moment ago, for a
// test server to listen on. Another process may take it first; that is
// rare, and fails the test loudly when the server cannot bind.
func FreePort(t testing.TB) int { return FreePorts(t, 1)[0] }

// FreePorts returns n distinct loopback TCP ports that were free a moment
// ago: all n are held until the last is chosen, so that the kernel cannot
// hand out one twice (as two FreePort calls in a row may).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// OnFreePorts calls start with n free ports (see FreePorts) until it
// succeeds, three times at most: another process may take a port between
// the probe and the server's bind. It fails the test with start's last
// error; start must leave nothing running when it fails.
func OnFreePorts(t testing.TB, n int, start func(ports []int) error) {
	t.Helper()
	var err error
	for range 3 {
		if err = start(FreePorts(t, n)); err == nil {
			return
		}
	}
	t.Fatal(err)
}
