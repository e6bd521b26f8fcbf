package app

import (
	"github.com/urfave/cli/v2"

	"github.com/lockrun/lockrun/internal/runner"
)

// runFlags are run's flags for fallback and metrics (see runCommand).
func runFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "fail-open", EnvVars: env("FAIL_OPEN"), Usage: "run the command WITHOUT the lock when the backend cannot be reached at start (never when the lock is busy); for locks that only save work"},
		&cli.StringFlag{Name: "metrics-file", EnvVars: env("METRICS_FILE"), Usage: "write the run's figures to `PATH` in the Prometheus text format (node_exporter textfile collector), atomically"},
	}
}

// failOpenAfterOpen runs the job without a lock when opening the backend
// failed with openErr and the job falls back on an outage; otherwise it
// returns openErr.
func failOpenAfterOpen(c *cli.Context, job runner.Job, openErr error) error {
	if !job.FailOpen || !runner.FailOpenable(openErr) {
		return openErr
	}
	return runner.RunUnlocked(c.Context, job, openErr)
}
