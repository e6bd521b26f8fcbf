package backendtest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNeedServerHelper is run by TestNeedServer in a child process: a
// test whose server is missing.
func TestNeedServerHelper(t *testing.T) {
	if os.Getenv("BACKENDTEST_NEED_HELPER") == "" {
		t.Skip("run by TestNeedServer")
	}
	NeedServer(t, "redis-server", errors.New("not installed"))
	t.Log("NeedServer returned")
}

// TestNeedServer: a missing server skips the test with one line naming
// make test, and fails it when CI is set.
func TestNeedServer(t *testing.T) {
	NeedServer(t, "anything", nil) // no error: nothing happens
	for _, ci := range []string{"", "true"} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestNeedServerHelper$", "-test.v")
		cmd.Env = append(os.Environ(), "BACKENDTEST_NEED_HELPER=1", "CI="+ci)
		out, err := cmd.CombinedOutput()
		text := string(out)
		switch {
		case strings.Contains(text, "NeedServer returned"):
			t.Errorf("CI=%q: the test went on without its server:\n%s", ci, text)
		case ci == "" && (err != nil || !strings.Contains(text, "--- SKIP") || !strings.Contains(text, "`make test`")):
			t.Errorf("without CI: want a skip naming `make test`, got %v:\n%s", err, text)
		case ci != "" && (err == nil || !strings.Contains(text, "--- FAIL")):
			t.Errorf("with CI set: want a failure, got %v:\n%s", err, text)
		}
	}
}
