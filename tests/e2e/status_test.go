package e2e_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
)

// An operator hunting a lock, on every backend: status says who holds it,
// since when and what it runs (in a CI job, the job's URL), and its exit
// status tells held from free; list shows it; a waiter says whom it waits
// for and a timeout names the holder; release says whose lock it broke,
// and that a free lock was free.
func TestOperatorSeesWhoHoldsWhat(t *testing.T) {
	lockruntest.Binary(t)
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			url := srv.url(t)
			ready := filepath.Join(t.TempDir(), "ready")
			ci := []string{"GITLAB_CI=true", "CI_JOB_URL=https://gitlab.example/o/r/-/jobs/42"}
			holder := start(t, envFor(url, ci...), "run", "--ttl", "3", "--holder", "deployer", "ops.deploy",
				"--", "sh", "-c", "echo > "+ready+"; sleep 30", "\x1b[2J")
			waitFile(t, ready)
			e := envFor(url)

			r := run(t, e, "status", "ops.deploy")
			want := []string{"held by deployer (token ", "since:", "renewed:", "user:", "command:  sh -c 'echo > ", "sleep 30' '\\x1b[2J'", "ci job:   https://gitlab.example/o/r/-/jobs/42"}
			for _, w := range want {
				if r.Code != 0 || !strings.Contains(r.Stdout, w) || strings.Contains(r.Stdout, "\x1b") {
					t.Errorf("status of a held lock: exit %d, stdout %q; want 0, %q, no raw escape", r.Code, r.Stdout, w)
				}
			}
			checkStatusJSON(t, e)
			checkList(t, e)
			if r := run(t, e, "status", "-q", "ops.other"); r.Code != 1 || r.Stdout != "" || r.Stderr != "" {
				t.Errorf("status -q of a free lock: exit %d, %q %q; want 1 and silence", r.Code, r.Stdout, r.Stderr)
			}
			if r := run(t, e, "release", "ops.other"); r.Code != 1 || !strings.Contains(r.Stdout, "free, nothing to release") {
				t.Errorf("release of a free lock: exit %d, %q %q; want 1 saying it was free", r.Code, r.Stdout, r.Stderr)
			}

			began := time.Now()
			r = run(t, e, "run", "--timeout", "1", "ops.deploy", "--", "true")
			if took := time.Since(began); r.Code != 75 || took < time.Second ||
				!strings.Contains(r.Stderr, `waiting for lock "ops.deploy", held by deployer`) ||
				!strings.Contains(r.Stderr, "timed out after 1s") || strings.Count(r.Stderr, "held by deployer") != 2 {
				t.Errorf("--timeout 1 on a held lock: exit %d after %v, stderr %q; want 75 after 1s, the wait and the timeout naming the holder", r.Code, took, r.Stderr)
			}

			r = run(t, e, "release", "ops.deploy")
			if r.Code != 0 || !strings.Contains(r.Stdout, "released the lock of deployer") || !strings.Contains(r.Stdout, "token ") {
				t.Errorf("release: exit %d, stdout %q, stderr %q; want 0 naming the holder and token", r.Code, r.Stdout, r.Stderr)
			}
			if code := exitCode(t, holder); code != 76 {
				t.Errorf("released holder exit %d, want 76", code)
			}
		})
	}
}

func checkStatusJSON(t *testing.T, e []string) {
	t.Helper()
	r := run(t, e, "status", "--json", "ops.deploy")
	var s struct {
		Held   bool
		Holder string
		Token  uint64
		TTL    float64 `json:"ttl_s"`
		Since  time.Time
		Info   struct {
			User, Command string
			CIURL         string `json:"ci_url"`
		}
	}
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil || r.Code != 0 || !s.Held || s.Holder != "deployer" || s.Token == 0 {
		t.Fatalf("status --json: exit %d, %q (%v)", r.Code, r.Stdout, err)
	}
	if time.Since(s.Since) > time.Minute || s.Info.CIURL != "https://gitlab.example/o/r/-/jobs/42" || s.Info.User == "" || !strings.HasPrefix(s.Info.Command, "sh -c") {
		t.Errorf("status --json lacks the holder's record: %q", r.Stdout)
	}
}

func checkList(t *testing.T, e []string) {
	t.Helper()
	r := run(t, e, "list", "ops")
	rows := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.Code != 0 || len(rows) != 2 || !strings.HasPrefix(rows[0], "KEY ") || !strings.HasPrefix(rows[1], "ops.deploy ") ||
		!strings.Contains(rows[1], `deployer`) || strings.Index(rows[0], "TOKEN") != strings.Index(rows[1], strings.Fields(rows[1])[2]) {
		t.Errorf("list ops: exit %d, %q; want a header and one aligned row", r.Code, r.Stdout)
	}
	var all []map[string]any
	if r := run(t, e, "list", "--json"); json.Unmarshal([]byte(r.Stdout), &all) != nil || len(all) != 1 || all[0]["key"] != "ops.deploy" {
		t.Errorf("list --json: %q", r.Stdout)
	}
	if r := run(t, e, "list", "nothing-here"); r.Code != 0 || strings.Count(r.Stdout, "\n") != 1 {
		t.Errorf("list of an unused prefix: exit %d, %q; want 0 and the header only", r.Code, r.Stdout)
	}
}
