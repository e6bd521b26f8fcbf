package app

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lockrun/lockrun/internal/runner"
)

// lastSuccess is the metric that carries the time of the last successful
// run from one run's file to the next.
const lastSuccess = "lockrun_last_success_timestamp_seconds"

// checkMetricsFile refuses a --metrics-file whose directory does not
// exist, before the command runs rather than after.
func checkMetricsFile(path string) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(filepath.Dir(path))
	if err != nil || !st.IsDir() {
		return usagef("--metrics-file %s: its directory must exist", path)
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return usagef("--metrics-file %s is a directory: name a file, e.g. %s", path, filepath.Join(path, "lockrun.prom"))
	}
	return nil
}

// runFigures are what one run's metrics file says.
type runFigures struct {
	key    string
	limit  int // --limit: 1 for a plain lock
	stats  runner.Stats
	status int       // lockrun's exit status
	end    time.Time // when the run ended
}

// writeMetrics writes the run's figures to path in the Prometheus text
// format, atomically (a hidden temporary file in the same directory,
// fsynced, then renamed over path), so that node_exporter's textfile
// collector never reads half a file. The last success time is this run's
// end if its command ran and lockrun exited 0, else the one the previous file recorded for the key.
func writeMetrics(path string, r runFigures) error {
	success, err := previousSuccess(path, r.key)
	if err != nil {
		return err
	}
	if r.status == 0 && r.stats.Started { // not a busy run under --conflict-exit-code 0
		success = float64(r.end.UnixMilli()) / 1e3
	}
	text := formatMetrics(r, success)
	dir, base := filepath.Split(path)
	tmp, err := os.CreateTemp(dir, "."+base+".tmp*") // no .prom suffix: the collector skips it
	if err != nil {
		return fmt.Errorf("--metrics-file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	_, err = tmp.WriteString(text)
	err = errors.Join(err, tmp.Chmod(0o644), tmp.Sync())
	if err = errors.Join(err, tmp.Close()); err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("--metrics-file %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes a rename in dir durable; failing to is not worth failing
// the run for, since the file is already in place.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer d.Close()
	_ = d.Sync()
	return nil
}

// previousSuccess is the last success time path records for key, or 0 if
// it records none or does not exist.
func previousSuccess(path, key string) (float64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("--metrics-file %s: reading the last success time: %w", path, err)
	}
	defer f.Close()
	prefix := lastSuccess + "{key=" + strconv.Quote(key) + "} "
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			t, err := strconv.ParseFloat(v, 64)
			if err == nil && t > 0 {
				return t, nil
			}
		}
	}
	return 0, nil
}

// formatMetrics is the text of the metrics file: one gauge each, labelled
// by key. The last success time is left out until there has been one, so
// that an alert on its absence fires for a job that never succeeded.
func formatMetrics(r runFigures, success float64) string {
	var b strings.Builder
	label := "{key=" + strconv.Quote(r.key) + "}" // keys are printable ASCII: Go's quoting is the format's
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s%s %s\n", name, help, name, name, label, strconv.FormatFloat(v, 'g', -1, 64))
	}
	gauge("lockrun_wait_seconds", "Time the last run spent asking for the lock, waiting included.", r.stats.Waited.Seconds())
	gauge("lockrun_run_seconds", "Time the last run's command ran, its leftover processes included; 0 if it did not start.", r.stats.Ran.Seconds())
	gauge("lockrun_exit_status", "Exit status of the last run of lockrun (75 busy, 76 lock lost, 124 --max-run, 69 backend unavailable, ...).", float64(r.status))
	gauge("lockrun_lock_lost", "1 if the last run lost the lock while its command ran.", bool01(r.stats.Lost))
	gauge("lockrun_fail_open", "1 if the last run ran its command without the lock (--fail-open).", bool01(r.stats.FailOpen))
	gauge("lockrun_limit", "The --limit of the last run: how many runs may hold the key at once (1: a plain lock).", float64(max(r.limit, 1)))
	gauge("lockrun_last_run_timestamp_seconds", "Unix time at which the last run ended.", float64(r.end.UnixMilli())/1e3)
	if success > 0 {
		gauge(lastSuccess, "Unix time at which the last run whose command ran and exited 0 ended.", success)
	}
	return b.String()
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
