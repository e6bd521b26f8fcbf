package examples

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// githubDeployScript is the run: block of the workflow's deploy step, as
// the runner would hand it to bash.
func githubDeployScript(t *testing.T) string {
	t.Helper()
	lines := fileLines(t, "ci/github-actions.yml")
	for i, l := range lines {
		if strings.TrimSpace(l) != "- name: Deploy, one at a time" {
			continue
		}
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "run: |" {
				return block(lines[j+1:], indent(lines[j]))
			}
		}
	}
	t.Fatal("ci/github-actions.yml has no deploy step with a run: | block")
	return ""
}

// gitlabDeployScript is the deploy job's script: lines, one command each.
func gitlabDeployScript(t *testing.T) string {
	t.Helper()
	lines := fileLines(t, "ci/gitlab-ci.yml")
	for i, l := range lines {
		if strings.TrimSpace(l) != "script:" {
			continue
		}
		var cmds []string
		for _, item := range strings.Split(block(lines[i+1:], indent(l)), "\n") {
			cmds = append(cmds, strings.TrimPrefix(strings.TrimSpace(item), "- "))
		}
		return strings.Join(cmds, "\n")
	}
	t.Fatal("ci/gitlab-ci.yml has no script:")
	return ""
}

// yamlValue is the value of the first "key: value" line of file.
func yamlValue(t *testing.T, file, key string) string {
	t.Helper()
	for _, l := range fileLines(t, file) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+":"); ok {
			return strings.Trim(strings.TrimSpace(v), `"`)
		}
	}
	t.Fatalf("%s has no %s", file, key)
	return ""
}

// block is the lines indented deeper than parent, up to the first that is not.
func block(lines []string, parent int) string {
	var out []string
	for _, l := range lines {
		if strings.TrimSpace(l) != "" && indent(l) <= parent {
			break
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

func indent(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }

func fileLines(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(data), "\n")
}

// ciJob runs script as a CI runner would (bash -e, in the checkout, with
// the job's variables), lockrun on PATH and the fleet's lock server.
func ciJob(t *testing.T, script string, vars ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = "ci"
	binDir := filepath.Dir(lockruntest.Binary(t))
	cmd.Env = append(os.Environ(), append(vars, "PATH="+binDir+":"+os.Getenv("PATH"))...)
	return cmd
}

// TestCIDeploysFromGitHubAndGitLabRunOneAtATime runs the deploy scripts of
// the GitHub Actions and the GitLab CI examples, two pipelines of each at
// once, against one Redis: the four deploys must not overlap, and each
// must name its pipeline as the lock's holder.
func TestCIDeploysFromGitHubAndGitLabRunOneAtATime(t *testing.T) {
	fleet := "LOCKRUN_BACKEND=" + redistest.Start(t).URL()
	github, gitlab := githubDeployScript(t), gitlabDeployScript(t)
	ghEnv := "DEPLOY_ENV=" + yamlValue(t, "ci/github-actions.yml", "DEPLOY_ENV")
	glEnv := "DEPLOY_ENV=" + yamlValue(t, "ci/gitlab-ci.yml", "DEPLOY_ENV")
	jobs := []*exec.Cmd{
		ciJob(t, github, fleet, ghEnv, "GITHUB_REPOSITORY=acme/shop", "GITHUB_RUN_ID=101"),
		ciJob(t, gitlab, fleet, glEnv, "CI_PROJECT_PATH=acme/billing", "CI_JOB_ID=201"),
		ciJob(t, github, fleet, ghEnv, "GITHUB_REPOSITORY=acme/shop", "GITHUB_RUN_ID=102"),
		ciJob(t, gitlab, fleet, glEnv, "CI_PROJECT_PATH=acme/billing", "CI_JOB_ID=202"),
	}
	log, err := os.OpenFile(filepath.Join(t.TempDir(), "log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	var wg sync.WaitGroup
	for _, job := range jobs {
		job.Stdout, job.Stderr = log, log
		wg.Go(func() {
			if err := job.Run(); err != nil {
				t.Errorf("%s: %v", job.Env[len(job.Env)-2], err)
			}
		})
	}
	wg.Wait()
	checkOneAtATime(t, log.Name(), []string{
		"holder github:acme/shop/actions/runs/101", "holder github:acme/shop/actions/runs/102",
		"holder gitlab:acme/billing/-/jobs/201", "holder gitlab:acme/billing/-/jobs/202",
	})
}

// checkOneAtATime reads a log of "deploying ..." and "deployed ..." lines:
// each start must be followed by its end before the next start, and every
// holder in holders must have deployed. The pipelines that queued say
// whom they waited for, in lines of their own.
func checkOneAtATime(t *testing.T, path string, holders []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	waits := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "lockrun: waiting for lock ") && strings.Contains(sc.Text(), ", held by ") {
			waits++
			continue
		}
		lines = append(lines, sc.Text())
	}
	if waits == 0 {
		t.Errorf("no pipeline said whom it waited for")
	}
	text := strings.Join(lines, "\n")
	if len(lines) != 2*len(holders) {
		t.Fatalf("want %d deploys, got this log:\n%s", len(holders), text)
	}
	for i := 0; i < len(lines); i += 2 {
		if !strings.HasPrefix(lines[i], "deploying ") || !strings.HasPrefix(lines[i+1], "deployed ") {
			t.Fatalf("deploys overlapped:\n%s", text)
		}
	}
	for _, h := range holders {
		if !strings.Contains(text, h+")") {
			t.Errorf("no deploy by %s:\n%s", h, text)
		}
	}
}
