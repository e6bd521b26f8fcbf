package backendtest

import (
	"net"
	"testing"
)

// FreePort returns a loopback TCP port that was free a moment ago, for a
// test server to listen on. Another process may take it first; that is
// rare, and fails the test loudly when the server cannot bind.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
