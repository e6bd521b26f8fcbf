package e2e_test

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
)

// sample is one line of the Prometheus text format: name{labels} value.
var sample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{key="((?:[^"\\]|\\.)*)"\} (\S+)$`)

// readMetrics parses a metrics file as node_exporter's textfile collector
// would need it: every sample line well-formed, labelled by key, each
// metric declared by a TYPE line before its sample. It returns value by
// metric name for key.
func readMetrics(t *testing.T, path, key string) map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	typed, got := map[string]bool{}, map[string]float64{}
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, kind, _ := strings.Cut(rest, " ")
			typed[name] = kind == "gauge"
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		m := sample.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s: malformed line %q", path, line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil || !typed[m[1]] || m[2] != key {
			t.Fatalf("%s: line %q: value %v, declared a gauge %v, key %q (want %q)", path, line, err, typed[m[1]], m[2], key)
		}
		got[m[1]] = v
	}
	return got
}

// wantMetrics compares the figures that must be exact.
func wantMetrics(t *testing.T, what string, got map[string]float64, status, lost, failOpen float64) {
	t.Helper()
	if got["lockrun_exit_status"] != status || got["lockrun_lock_lost"] != lost || got["lockrun_fail_open"] != failOpen {
		t.Errorf("%s: %v; want exit_status %v, lock_lost %v, fail_open %v", what, got, status, lost, failOpen)
	}
	if end := got["lockrun_last_run_timestamp_seconds"]; math.Abs(end-float64(time.Now().Unix())) > 10 {
		t.Errorf("%s: last run ended at %v, not now", what, end)
	}
}

func TestMetricsFileRecordsEachRunAndTheLastSuccess(t *testing.T) {
	dir, locks := t.TempDir(), "file://"+t.TempDir()
	prom := filepath.Join(dir, "nightly.prom")
	e := withBackend(locks)
	metricsRun := func(args ...string) lockruntest.Result {
		return lockruntest.Run(t, e, append([]string{"run", "--metrics-file", prom}, args...)...)
	}

	if r := metricsRun("nightly", "--", "sleep", "0.2"); r.Code != 0 {
		t.Fatalf("first run: exit %d, %s", r.Code, r.Stderr)
	}
	m := readMetrics(t, prom, "nightly")
	wantMetrics(t, "success", m, 0, 0, 0)
	success := m["lockrun_last_success_timestamp_seconds"]
	// The run's clock starts when lockrun hears that the exec is done,
	// which on a loaded host may be milliseconds after sleep began.
	if ran := m["lockrun_run_seconds"]; ran < 0.15 || ran > 5 || success != m["lockrun_last_run_timestamp_seconds"] {
		t.Errorf("success: run_seconds %v (slept 0.2s), last success %v, last run %v", ran, success, m["lockrun_last_run_timestamp_seconds"])
	}
	if st, err := os.Stat(prom); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("metrics file: %v, %v; want mode 0644 so the collector can read it", st.Mode(), err)
	}

	time.Sleep(20 * time.Millisecond) // the next end time differs from the first
	if r := metricsRun("nightly", "--", "sh", "-c", "exit 5"); r.Code != 5 {
		t.Fatalf("failing run: exit %d, %s", r.Code, r.Stderr)
	}
	m = readMetrics(t, prom, "nightly")
	wantMetrics(t, "failure", m, 5, 0, 0)
	if m["lockrun_last_success_timestamp_seconds"] != success || m["lockrun_last_run_timestamp_seconds"] <= success {
		t.Errorf("failure: last success %v, last run %v; want the first run's success %v kept", m["lockrun_last_success_timestamp_seconds"], m["lockrun_last_run_timestamp_seconds"], success)
	}

	ready := filepath.Join(t.TempDir(), "ready")
	holder := lockruntest.Start(t, e, "run", "nightly", "--", "sh", "-c", "echo > "+ready+"; exec sleep 60")
	waitFile(t, ready)
	if r := metricsRun("--timeout", "300ms", "nightly", "--", "true"); r.Code != 75 {
		t.Fatalf("busy run: exit %d, %s", r.Code, r.Stderr)
	}
	m = readMetrics(t, prom, "nightly")
	wantMetrics(t, "busy", m, 75, 0, 0)
	if m["lockrun_wait_seconds"] < 0.3 || m["lockrun_run_seconds"] != 0 || m["lockrun_last_success_timestamp_seconds"] != success {
		t.Errorf("busy: %v; want wait_seconds >= 0.3, run_seconds 0, the success kept", m)
	}
	// A fleet's crontab treats busy as fine (exit 0): that host did not
	// run the job, so it is no success.
	if r := metricsRun("-q", "--conflict-exit-code", "0", "nightly", "--", "true"); r.Code != 0 {
		t.Fatalf("busy run with --conflict-exit-code 0: exit %d, %s", r.Code, r.Stderr)
	}
	if m = readMetrics(t, prom, "nightly"); m["lockrun_last_success_timestamp_seconds"] != success {
		t.Errorf("busy run with --conflict-exit-code 0: %v; want the success %v kept", m, success)
	}
	holder.Process.Kill()
	holder.Wait()

	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("metrics directory holds %d entries, want only the metrics file (no temporary left)", len(entries))
	}
}

func TestMetricsFileMarksFailOpenAndLostRuns(t *testing.T) {
	prom := filepath.Join(t.TempDir(), "job.prom")
	r := lockruntest.Run(t, withBackend(unreachable(t)["redis"]), "run", "--fail-open", "--metrics-file", prom, "job", "--", "true")
	if r.Code != 0 {
		t.Fatalf("fail-open run: exit %d, %s", r.Code, r.Stderr)
	}
	wantMetrics(t, "fail-open", readMetrics(t, prom, "job"), 0, 0, 1)

	dir := t.TempDir()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := lockruntest.Start(t, withBackend("file://"+dir), "run", "--ttl", "3s", "--metrics-file", prom, "job", "--", "sh", "-c", "echo > "+ready+"; exec sleep 60")
	waitFile(t, ready)
	if err := os.Remove(filepath.Join(dir, "job.lock")); err != nil {
		t.Fatal(err)
	}
	if code := lockruntest.ExitCode(t, cmd); code != 76 {
		t.Fatalf("lost run: exit %d, want 76", code)
	}
	m := readMetrics(t, prom, "job")
	wantMetrics(t, "lost", m, 76, 1, 0)
	if m["lockrun_last_success_timestamp_seconds"] == 0 {
		t.Errorf("lost: the fail-open run's success was not kept: %v", m)
	}
}

func TestMetricsFileInAMissingDirectoryIsAUsageError(t *testing.T) {
	prom := filepath.Join(t.TempDir(), "no-such-dir", "job.prom")
	r := lockruntest.Run(t, env(t), "run", "--metrics-file", prom, "job", "--", "echo", "ran")
	if r.Code != 64 || r.Stdout != "" || !strings.Contains(r.Stderr, "--metrics-file") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 64 before the command runs", r.Code, r.Stdout, r.Stderr)
	}
}
