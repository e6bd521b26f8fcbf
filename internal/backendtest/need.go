package backendtest

import (
	"fmt"
	"os"
	"testing"
)

// NeedServer decides, for every test-server helper, what a missing server
// means: err says why what (e.g. "redis-server") cannot be had. Without
// err it does nothing. On a machine without the servers (a laptop, plain
// `go test ./...`) the test is skipped with one line naming `make test`;
// with CI set it fails, since CI must run every test and a skip there
// would hide a broken setup.
func NeedServer(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s: %v", what, err)
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set, so a missing server fails: .ci/services.sh installs and starts them)", msg)
	}
	t.Skipf("%s: skipping; `make test` (as root on Debian) installs and starts the servers", msg)
}
