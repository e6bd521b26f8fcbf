package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"
	"unicode"

	"github.com/urfave/cli/v2"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/heartbeat"
	"github.com/lockrun/lockrun/internal/randtext"
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

   # at most 2 deploys at once; a third waits for a free slot
   lockrun run --limit 2 --wait deploy -- ./deploy.sh

   # a fleet's crontab: the job runs once per schedule even when hosts' crons fire up to 5 minutes apart
   lockrun run -q --conflict-exit-code 0 --min-hold 5m nightly-report -- /opt/report.sh

Durations are seconds (10, 0.5) or Go durations (1m30s).

EXIT STATUS:
   the command's own status (128+N if signal N killed it); 75 lock busy (--conflict-exit-code);
   76 lock lost (or its watchdog died), command stopped; 124 --max-run reached, command stopped;
   64 usage error; 69 backend unavailable (may work later); 77 permission or authentication refused;
   78 backend configuration error, or KEY held with another --limit; 70 internal error; 126 command not executable;
   127 command not found; 137 lockrun was frozen past its deadline before the command started,
   and its watchdog killed it (the command never ran)`

func runCommand(st *state) *cli.Command {
	return &cli.Command{
		Name:         "run",
		Usage:        "run a command while holding a lock",
		UsageText:    "lockrun run [flags] KEY -- COMMAND [ARG...]",
		Description:  runDescription,
		OnUsageError: onUsageError,
		Flags: append(append(commonFlags("print errors only: say nothing when the lock is busy or while waiting", runVerbose), runFlags()...),
			durationFlag("ttl", "TTL", "lease length: how long the lock outlives a holder that stops renewing", 30*time.Second, ""),
			durationFlag("heartbeat", "HEARTBEAT", "time between renewals", 0, "ttl/3"),
			durationFlag("kill-grace", "KILL_GRACE", "time from SIGTERM to SIGKILL when the lock is lost", 0, "ttl/6, at most 5s"),
			&cli.BoolFlag{Name: "wait", Aliases: []string{"w"}, EnvVars: env("WAIT"), Usage: "wait for the lock instead of exiting when it is busy"},
			durationFlag("timeout", "TIMEOUT", "wait at most this long for the lock, then exit busy (implies --wait)", 0, ""),
			durationFlag("min-hold", "MIN_HOLD", "keep the lock taken until this long after the grant, even when the command ends sooner, "+
				"so that hosts whose cron fires a little later skip the run; lockrun itself exits when the command does", 0, ""),
			durationFlag("max-run", "MAX_RUN", "stop the command (SIGTERM, kill grace, SIGKILL) once it has run this long, and exit 124", 0, "no limit"),
			decimalFlag("conflict-exit-code", "CONFLICT_EXIT_CODE", "exit status when the lock is busy", ExitBusy),
			&cli.StringFlag{Name: "holder", EnvVars: env("HOLDER"), Usage: "who holds the lock, as others see it", DefaultText: "host:pid"},
			decimalFlag("limit", "LIMIT", "let up to `N` runs (1.."+strconv.Itoa(backend.MaxLimit)+") hold KEY at once, "+
				"a semaphore: each has its own lease and fencing token; every run on KEY must ask for the same N (else exit 78)", 1),
		),
		Action: st.run,
	}
}

// commonFlags are the flags of every command; quiet and verbose say what
// --quiet and --verbose mean for it.
func commonFlags(quiet, verbose string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "backend", Aliases: []string{"b"}, EnvVars: env("BACKEND"), Usage: "where locks live: file:///dir, redis://, redlock://, etcd://, postgres://, zk://", DefaultText: "the embedded file backend"},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, EnvVars: env("QUIET"), Usage: quiet},
		verboseFlag(verbose),
		&cli.StringFlag{Name: "log-format", Value: "text", EnvVars: env("LOG_FORMAT"), Usage: "text or json"},
		&cli.StringFlag{Name: "log", Value: logStderr, EnvVars: env("LOG"), Usage: "where lockrun's own lines go: stderr, syslog (or syslog:/path/to/socket), journald (or journald:/path/to/socket)"},
	}
}

func env(name string) []string { return []string{"LOCKRUN_" + name} }

func (st *state) run(c *cli.Context) error {
	log, err := st.logFrom(c)
	if err != nil {
		return err
	}
	key, argv, err := splitArgs(c.Args().Slice())
	if err != nil {
		return err
	}
	var settings []heartbeat.Setting
	if c.IsSet("heartbeat") {
		settings = append(settings, heartbeat.WithInterval(duration(c, "heartbeat")))
	}
	if c.IsSet("kill-grace") {
		settings = append(settings, heartbeat.WithGrace(duration(c, "kill-grace")))
	}
	policy, err := heartbeat.NewPolicy(duration(c, "ttl"), settings...)
	if err != nil {
		return usagef("--ttl, --heartbeat, --kill-grace: %v", err)
	}
	timeout, minHold := duration(c, "timeout"), duration(c, "min-hold")
	if timeout < 0 || minHold < 0 {
		return usagef("--timeout %v and --min-hold %v must not be negative", timeout, minHold)
	}
	maxRun := duration(c, "max-run")
	if maxRun < 0 {
		return usagef("--max-run %v must not be negative", maxRun)
	}
	busy := count(c, "conflict-exit-code")
	if busy < 0 || busy > 255 {
		return usagef("--conflict-exit-code %d must be within 0..255", busy)
	}
	holder, err := holderName(c.String("holder"))
	if err != nil {
		return err
	}
	limit := count(c, "limit")
	if limit < 1 || limit > backend.MaxLimit {
		return usagef("--limit %d must be from 1 to %d", limit, backend.MaxLimit)
	}
	path, err := runner.Resolve(argv[0])
	if err != nil {
		return err
	}
	if err := checkMetricsFile(c.String("metrics-file")); err != nil {
		return err
	}
	runID, err := randtext.Text()
	if err != nil {
		return fmt.Errorf("a run id: %w", err)
	}
	raw := c.String("backend")
	job := runner.Job{
		Key: key,
		Acquire: backend.AcquireOptions{TTL: policy.TTL, Holder: holder, RunID: runID, Wait: c.Bool("wait") || timeout > 0,
			MinHold: minHold, Info: holderInfo(argv, os.Getenv), Limit: limit},
		Policy:   policy,
		Timeout:  timeout,
		MaxRun:   maxRun,
		Path:     path,
		Args:     argv,
		Stdio:    [3]*os.File{st.stdin, st.stdout, st.stderr},
		Watchdog: findWatchdog(log).ForRun(runID),
		Log:      runLogger(log, key, limit),
		FailOpen: c.Bool("fail-open"),
		Stats:    &runner.Stats{},
	}
	err = withBusyCode(st.runJob(c, raw, job), busy)
	if file := c.String("metrics-file"); file != "" {
		figures := runFigures{key: key, limit: limit, stats: *job.Stats, status: exitCode(err), end: time.Now()}
		if merr := writeMetrics(file, figures); merr != nil {
			log.Error("could not write the metrics file", "err", merr)
		}
	}
	return err
}

// runLogger is the run's logger: every line names the key and, for a
// semaphore, its limit (a plain lock's lines stay as they were).
func runLogger(log *slog.Logger, key string, limit int) *slog.Logger {
	if limit > 1 {
		return log.With("key", key, "limit", limit)
	}
	return log.With("key", key)
}

// runJob opens the backend and runs job under its lock, or without one if
// the job may fail open and the backend cannot be reached.
func (st *state) runJob(c *cli.Context, raw string, job runner.Job) error {
	b, err := st.openBackend(c.Context, raw)
	if err != nil {
		job.BackendURL = backend.Redact(raw)
		return failOpenAfterOpen(c, job, err)
	}
	defer b.Close()
	waits := st.announcer(b, job.Log)
	job.Locker, job.BackendURL = waits, describeBackend(raw, b)
	return waits.ended(runner.Run(c.Context, job))
}

// findWatchdog is the watchdog program beside lockrun, or lockrun itself
// (the hidden watchdog command) where there is none, which it logs at
// debug level: a guard as good, slower to start.
func findWatchdog(log *slog.Logger) watchdog.Program {
	p, why := watchdog.Find()
	if why != nil {
		log.Debug("no "+watchdog.ProgramName+" beside lockrun: lockrun runs itself as the watchdog", "why", why.Error())
	}
	return p
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
