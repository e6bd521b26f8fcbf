package app

import (
	"strings"
	"testing"
)

func TestCIURL(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GITHUB_ACTIONS": "true", "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "7", "GITHUB_RUN_ATTEMPT": "2"},
			"https://github.com/o/r/actions/runs/7/attempts/2"},
		{map[string]string{"GITLAB_CI": "true", "CI_JOB_URL": "https://gitlab.example/o/r/-/jobs/9"}, "https://gitlab.example/o/r/-/jobs/9"},
		{map[string]string{"BUILDKITE": "true", "BUILDKITE_BUILD_URL": "https://buildkite.com/o/p/builds/3", "BUILDKITE_JOB_ID": "j1"},
			"https://buildkite.com/o/p/builds/3#j1"},
		{map[string]string{"JENKINS_URL": "https://ci/", "BUILD_URL": "https://ci/job/x/5/"}, "https://ci/job/x/5/"},
		{map[string]string{"BUILD_URL": "https://not-jenkins/"}, ""},
		{nil, ""},
	} {
		if got := ciURL(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("ciURL(%v) = %q, want %q", c.env, got, c.want)
		}
	}
}

func TestCommandLine(t *testing.T) {
	if got, want := commandLine([]string{"sh", "-c", "echo 'hi' $X", "a b"}), `sh -c 'echo '\''hi'\'' $X' 'a b'`; got != want {
		t.Errorf("commandLine = %q, want %q", got, want)
	}
	long := commandLine([]string{strings.Repeat("é", 300)})
	if len(long) > maxCommand || !strings.HasSuffix(long, "...") || !strings.HasPrefix(long, "'é") {
		t.Errorf("long command line = %q (%d bytes)", long, len(long))
	}
}
