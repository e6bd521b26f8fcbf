package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// event is one JSON log line that carries a lifecycle event.
type event map[string]any

// events parses stderr as JSON lines and returns those with an "event"
// field, failing on any line that is not JSON.
func events(t *testing.T, stderr string) []event {
	t.Helper()
	var got []event
	for sc := bufio.NewScanner(strings.NewReader(stderr)); sc.Scan(); {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", sc.Text(), err)
		}
		if _, ok := e["event"]; ok {
			got = append(got, e)
		}
	}
	return got
}

// names are the events' names in order, each checked for the fields the
// table in docs/events.md promises.
func names(t *testing.T, evs []event) []string {
	t.Helper()
	fields := map[string][]string{
		"waiting":        {"key", "timeout"},
		"acquired":       {"key", "token", "ttl", "took"},
		"renewed":        {"key", "token", "took", "kill_by"},
		"renewal_failed": {"key", "token", "err", "term_in"},
		"lost":           {"key", "token", "pid", "reason", "kill_in"},
		"exited":         {"key", "token", "status", "lost"},
		"released":       {"key", "token"},
		"fail_open":      {"key", "err"},
	}
	var out []string
	for _, e := range evs {
		name, _ := e["event"].(string)
		want, known := fields[name]
		if !known {
			t.Errorf("undocumented event %q in %v", name, e)
		}
		for _, f := range want {
			if _, ok := e[f]; !ok {
				t.Errorf("event %q lacks field %q: %v", name, f, e)
			}
		}
		out = append(out, name)
	}
	return out
}

func TestLifecycleEventsOfACleanRun(t *testing.T) {
	r := lockruntest.Run(t, env(t), "run", "-v", "--log-format", "json", "--wait", "--ttl", "1500ms", "k", "--", "sleep", "1.6")
	if r.Code != 0 {
		t.Fatalf("exit %d, %s", r.Code, r.Stderr)
	}
	got := names(t, events(t, r.Stderr))
	// Renewals come every 500ms: at least one, even on a loaded host, within the 1.6s the command runs.
	renewed := slices.Index(got, "renewed")
	if len(got) < 5 || got[0] != "waiting" || got[1] != "acquired" || renewed < 0 || got[len(got)-2] != "exited" || got[len(got)-1] != "released" {
		t.Errorf("events %v; want waiting, acquired, renewed..., exited, released", got)
	}
}

func TestLifecycleEventsOfALostLock(t *testing.T) {
	srv := redistest.Start(t)
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(lockruntest.Binary(t), "run", "-v", "--log-format", "json", "--ttl", "2s", "k", "--", "sh", "-c", "echo > "+ready+"; exec sleep 60")
	cmd.Env = withBackend(srv.URL())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFile(t, ready)
	srv.Freeze()
	defer srv.Thaw()
	if code := lockruntest.ExitCode(t, cmd); code != 76 {
		t.Fatalf("exit %d, want 76; stderr %s", code, stderr.String())
	}
	got := names(t, events(t, stderr.String()))
	failed, lost := slices.Index(got, "renewal_failed"), slices.Index(got, "lost")
	if len(got) < 3 || got[0] != "acquired" || failed < 0 || lost < failed || got[len(got)-1] != "exited" {
		t.Errorf("events %v; want acquired, renewal_failed..., lost, exited", got)
	}
}

func TestLifecycleEventOfAFailOpenRun(t *testing.T) {
	r := lockruntest.Run(t, withBackend(unreachable(t)["etcd"]), "run", "-q", "--log-format", "json", "--fail-open", "k", "--", "true")
	if got := names(t, events(t, r.Stderr)); r.Code != 0 || !slices.Equal(got, []string{"fail_open"}) {
		t.Errorf("quiet fail-open run: exit %d, events %v; want 0 and the one fail_open event even with -q", r.Code, got)
	}
}
