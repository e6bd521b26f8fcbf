package app

import (
	"crypto/rand"
	"errors"
	"math"
	"os"
	"strconv"
	"time"
	"unicode"

	"github.com/urfave/cli/v2"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/heartbeat"
	"github.com/lockrun/lockrun/internal/runner"
	"github.com/lockrun/lockrun/internal/watchdog"
)

const runDescription = `Flags come before KEY. Every flag can also be set with its LOCKRUN_* variable.

EXAMPLES:
   # cron: one host runs the report; the others exit 0 quietly
   LOCKRUN_BACKEND=redis://cache:6379/0 lockrun run -q --conflict-exit-code 0 nightly-report -- /opt/report.sh

   # CI: deployments queue up, at most 10 minutes
   lockrun run --backend etcd://etcd-1:2379 --timeout 10m deploy-prod -- ./deploy.sh

   # the embedded file backend (no server) and the fencing token
   lockrun run demo -- sh -c 'echo "token $LOCKRUN_FENCING_TOKEN"'

EXIT STATUS:
   the command's own status (128+N if signal N killed it); 75 lock busy (--conflict-exit-code);
   76 lock lost (or its watchdog died), command stopped; 124 --max-run reached, command stopped;
   64 usage error; 69 backend unavailable; 70 internal error; 126 command not executable;
   127 command not found`

func runCommand(st *state) *cli.Command {
	return &cli.Command{
		Name:         "run",
		Usage:        "run a command while holding a lock",
		UsageText:    "lockrun run [flags] KEY -- COMMAND [ARG...]",
		Description:  runDescription,
		OnUsageError: onUsageError,
		Flags: append(append(commonFlags(), runFlags()...),
			&cli.DurationFlag{Name: "ttl", Value: 30 * time.Second, EnvVars: env("TTL"), Usage: "lease length: how long the lock outlives a holder that stops renewing"},
			&cli.DurationFlag{Name: "heartbeat", EnvVars: env("HEARTBEAT"), Usage: "time between renewals", DefaultText: "ttl/3"},
			&cli.DurationFlag{Name: "kill-grace", EnvVars: env("KILL_GRACE"), Usage: "time from SIGTERM to SIGKILL when the lock is lost", DefaultText: "ttl/6, at most 5s"},
			&cli.BoolFlag{Name: "wait", Aliases: []string{"w"}, EnvVars: env("WAIT"), Usage: "wait for the lock instead of exiting when it is busy"},
			&cli.DurationFlag{Name: "timeout", EnvVars: env("TIMEOUT"), Usage: "wait at most this long for the lock, then exit busy (implies --wait)"},
			&cli.StringFlag{Name: "max-run", EnvVars: env("MAX_RUN"), Usage: "stop the command (SIGTERM, kill grace, SIGKILL) once it has run this long, and exit 124; a bare number is seconds", DefaultText: "no limit"},
			&cli.IntFlag{Name: "conflict-exit-code", Value: ExitBusy, EnvVars: env("CONFLICT_EXIT_CODE"), Usage: "exit status when the lock is busy"},
			&cli.StringFlag{Name: "holder", EnvVars: env("HOLDER"), Usage: "who holds the lock, as others see it", DefaultText: "host:pid"},
			&cli.BoolFlag{Name: "verbose", Aliases: []string{"v"}, EnvVars: env("VERBOSE"), Usage: "log the lock's life: acquired, renewed, released"},
		),
		Action: st.run,
	}
}

// commonFlags are the flags of every command.
func commonFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "backend", Aliases: []string{"b"}, EnvVars: env("BACKEND"), Usage: "where locks live: file:///dir, redis://, etcd://, postgres://, zk://", DefaultText: "the embedded file backend"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, EnvVars: env("QUIET"), Usage: "print errors only; say nothing when the lock is busy"},
		&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: env("LOG_FORMAT"), Usage: "text or json, on stderr"},
	}
}

func env(name string) []string { return []string{"LOCKRUN_" + name} }

func (st *state) run(c *cli.Context) error {
	st.logw = newLogWriter(st.stderr, c.String("log-format"))
	log, err := st.logTo(st.logw, c.String("log-format"), c.Bool("quiet"), c.Bool("verbose"))
	if err != nil {
		return err
	}
	key, argv, err := splitArgs(c.Args().Slice())
	if err != nil {
		return err
	}
	var settings []heartbeat.Setting
	if c.IsSet("heartbeat") {
		settings = append(settings, heartbeat.WithInterval(c.Duration("heartbeat")))
	}
	if c.IsSet("kill-grace") {
		settings = append(settings, heartbeat.WithGrace(c.Duration("kill-grace")))
	}
	policy, err := heartbeat.NewPolicy(c.Duration("ttl"), settings...)
	if err != nil {
		return usagef("--ttl, --heartbeat, --kill-grace: %v", err)
	}
	timeout := c.Duration("timeout")
	if timeout < 0 {
		return usagef("--timeout %v must not be negative", timeout)
	}
	maxRun, err := seconds(c.String("max-run"))
	if err != nil || maxRun < 0 {
		return usagef("--max-run %q: use a duration such as 90s, 15m or 2h, or a number of seconds", c.String("max-run"))
	}
	busy := c.Int("conflict-exit-code")
	if busy < 0 || busy > 255 {
		return usagef("--conflict-exit-code %d must be within 0..255", busy)
	}
	holder, err := holderName(c.String("holder"))
	if err != nil {
		return err
	}
	path, err := runner.Resolve(argv[0])
	if err != nil {
		return err
	}
	if err := checkMetricsFile(c.String("metrics-file")); err != nil {
		return err
	}
	raw := c.String("backend")
	job := runner.Job{
		Key:      key,
		Acquire:  backend.AcquireOptions{TTL: policy.TTL, Holder: holder, RunID: rand.Text(), Wait: c.Bool("wait") || timeout > 0},
		Policy:   policy,
		Timeout:  timeout,
		MaxRun:   maxRun,
		Path:     path,
		Args:     argv,
		Stdio:    [3]*os.File{st.stdin, st.stdout, st.stderr},
		Watchdog: &watchdog.Self,
		Log:      log.With("key", key),
		FailOpen: c.Bool("fail-open"),
		Stats:    &runner.Stats{},
	}
	err = withBusyCode(st.runJob(c, raw, job), busy)
	if file := c.String("metrics-file"); file != "" {
		figures := runFigures{key: key, stats: *job.Stats, status: exitCode(err), end: time.Now()}
		if merr := writeMetrics(file, figures); merr != nil {
			log.Error("could not write the metrics file", "err", merr)
		}
	}
	return err
}

// runJob opens the backend and runs job under its lock, or without one if
// the job may fail open and the backend cannot be reached.
func (st *state) runJob(c *cli.Context, raw string, job runner.Job) error {
	b, err := openBackend(c.Context, raw)
	if err != nil {
		job.BackendURL = backend.Redact(raw)
		return failOpenAfterOpen(c, job, err)
	}
	defer b.Close()
	job.Locker, job.BackendURL = b, describeBackend(raw, b)
	return runner.Run(c.Context, job)
}

// seconds parses a duration flag: a Go duration, or a bare number of
// seconds as flock(1) and timeout(1) take; empty is 0.
func seconds(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f > float64(math.MaxInt64)/float64(time.Second) {
			return 0, strconv.ErrRange
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	return time.ParseDuration(s)
}

// watchdogCommand is the hidden command lockrun starts beside the user's
// command: it holds the kill deadline while lockrun cannot (see package
// watchdog, which owns its arguments).
func watchdogCommand() *cli.Command {
	return &cli.Command{
		Name:   watchdog.Subcommand,
		Hidden: true,
		Action: func(c *cli.Context) error {
			err := watchdog.Main(os.Stdin, c.Args().Slice())
			if errors.Is(err, watchdog.ErrUsage) {
				return usageError{err}
			}
			return err
		},
	}
}

// splitArgs takes KEY [--] COMMAND [ARG...] apart.
func splitArgs(args []string) (string, []string, error) {
	if len(args) == 0 {
		return "", nil, usagef("missing KEY and COMMAND: lockrun run [flags] KEY -- COMMAND [ARG...]")
	}
	key, rest := args[0], args[1:]
	if err := backend.ValidateKey(key); err != nil {
		return "", nil, usageError{err}
	}
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	} else if len(rest) > 0 && len(rest[0]) > 1 && rest[0][0] == '-' {
		return "", nil, usagef("%s after KEY: flags go before KEY (lockrun run [flags] KEY -- COMMAND), and a command that starts with '-' goes after --", rest[0])
	}
	if len(rest) == 0 {
		return "", nil, usagef("missing COMMAND after KEY %q: lockrun run [flags] KEY -- COMMAND [ARG...]", key)
	}
	return key, rest, nil
}

// holderName is name, or host:pid when name is empty.
func holderName(name string) (string, error) {
	if name == "" {
		host, err := os.Hostname()
		if err != nil {
			host = "localhost"
		}
		return host + ":" + strconv.Itoa(os.Getpid()), nil
	}
	if len(name) > 100 {
		return "", usagef("--holder is %d characters long; use at most 100", len(name))
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return "", usagef("--holder %q has a non-printable character", name)
		}
	}
	return name, nil
}
