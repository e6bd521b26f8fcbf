package app

import (
	"io"
	"os"
	"strings"
	"testing"
)

// backendArg reads --backend as the CLI does, up to the command's "--".
func TestBackendArgReadsTheFlagAsTheCLIDoes(t *testing.T) {
	for _, c := range []struct {
		args  []string
		want  string
		found bool
	}{
		{[]string{"-b", "etcd://h", "k", "--", "true"}, "etcd://h", true},
		{[]string{"--backend=redis://h", "k", "--", "true"}, "redis://h", true},
		{[]string{"-backend", "zk://h", "k"}, "zk://h", true},
		{[]string{"--b=postgres://h/db", "k"}, "postgres://h/db", true},
		{[]string{"-b", "etcd://a", "-q", "--backend", "etcd://b", "k"}, "etcd://b", true}, // the last one, as the CLI
		{[]string{"k", "--", "lockrun", "run", "-b", "etcd://h"}, "", false},               // the command's own
		{[]string{"--holder", "me", "k", "--", "true"}, "", false},
		{[]string{"-b"}, "", false},
		{[]string{"--bee", "x", "k"}, "", false},
	} {
		if got, found := backendArg(c.args); got != c.want || found != c.found {
			t.Errorf("backendArg(%q) = %q, %v; want %q, %v", c.args, got, found, c.want, c.found)
		}
	}
}

// A program started by a lockrun of another release refuses, exit 78,
// and nothing of its command line runs.
func TestAProgramFromAnotherReleaseRefuses(t *testing.T) {
	t.Setenv(delegatedVar, "v0.0.0-elsewhere")
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
	if _, ok := os.LookupEnv(delegatedVar); ok {
		t.Errorf("%s is still in the environment, for the command to see", delegatedVar)
	}
}
