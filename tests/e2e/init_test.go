package e2e_test

import (
	"strings"
	"testing"
)

func TestInitOnABackendWithNothingToPrepare(t *testing.T) {
	r := run(t, env(t), "init")
	if r.Code != 0 || !strings.Contains(r.Stdout, "nothing to prepare") {
		t.Errorf("init on the file backend: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	if r := run(t, env(t), "init", "extra"); r.Code != 64 {
		t.Errorf("init with an argument: exit %d, want 64", r.Code)
	}
}
