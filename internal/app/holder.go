package app

import (
	"os"
	"os/user"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lockrun/lockrun/backend"
)

// maxCommand bounds the command line recorded with a lease: enough to
// recognise the job, short enough for a status line and any store.
const maxCommand = 256

// holderInfo is what this run records about itself for status and list:
// the OS user, the command line and, in a CI job, the job's URL.
func holderInfo(argv []string, getenv func(string) string) backend.HolderInfo {
	return backend.HolderInfo{User: userName(getenv), Command: commandLine(argv), CIURL: ciURL(getenv)}
}

// userName is the name of the user lockrun runs as, or its uid.
func userName(getenv func(string) string) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if name := getenv("USER"); name != "" {
		return name
	}
	return strconv.Itoa(os.Getuid())
}

// commandLine is argv as a shell would read it back, cut to maxCommand
// bytes with "..." when longer.
func commandLine(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	line := strings.Join(quoted, " ")
	if len(line) <= maxCommand {
		return line
	}
	cut := maxCommand - 3
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut] + "..."
}

// shellQuote quotes s for sh when it holds anything but safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ciURL is the URL of the CI job lockrun runs in, from the variables that
// GitHub Actions, GitLab CI, Buildkite and Jenkins set; "" elsewhere.
func ciURL(getenv func(string) string) string {
	switch {
	case getenv("GITHUB_ACTIONS") == "true" && getenv("GITHUB_RUN_ID") != "":
		u := strings.TrimSuffix(getenv("GITHUB_SERVER_URL"), "/") + "/" + getenv("GITHUB_REPOSITORY") + "/actions/runs/" + getenv("GITHUB_RUN_ID")
		if attempt := getenv("GITHUB_RUN_ATTEMPT"); attempt != "" {
			u += "/attempts/" + attempt
		}
		return u
	case getenv("GITLAB_CI") != "" && getenv("CI_JOB_URL") != "":
		return getenv("CI_JOB_URL")
	case getenv("BUILDKITE") == "true" && getenv("BUILDKITE_BUILD_URL") != "":
		u := getenv("BUILDKITE_BUILD_URL")
		if job := getenv("BUILDKITE_JOB_ID"); job != "" {
			u += "#" + job
		}
		return u
	case getenv("JENKINS_URL") != "" && getenv("BUILD_URL") != "":
		return getenv("BUILD_URL")
	}
	return ""
}
