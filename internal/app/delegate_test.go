package app

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/lockrun/lockrun/internal/delegate"
)

// A program started by a lockrun of another release refuses, exit 78,
// and nothing of its command line runs.
func TestAProgramFromAnotherReleaseRefuses(t *testing.T) {
	t.Setenv(delegate.Var, "v0.0.0-elsewhere")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	code := Main(t.Context(), nil, []string{"lockrun", "--version"}, os.Stdin, w, w)
	w.Close()
	out, _ := io.ReadAll(r)
	if code != ExitConfig || !strings.Contains(string(out), "another release") || !strings.Contains(string(out), "v0.0.0-elsewhere") || strings.Contains(string(out), "lockrun version") {
		t.Errorf("Main started by another release: exit %d, output %q; want 78 and the refusal alone", code, out)
	}
	if _, ok := os.LookupEnv(delegate.Var); ok {
		t.Errorf("%s is still in the environment, for the command to see", delegate.Var)
	}
}
