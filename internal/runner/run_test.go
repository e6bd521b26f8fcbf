package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/clock"
	"github.com/lockrun/lockrun/internal/heartbeat"
	"github.com/lockrun/lockrun/internal/memory"
	"github.com/lockrun/lockrun/internal/procfs"
)

// These tests start real processes; the runner reaps every child of the
// test binary, so none of them runs in parallel.

func testJob(t *testing.T, l Locker, script string) Job {
	t.Helper()
	p, err := heartbeat.NewPolicy(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { null.Close(); out.Close() })
	return Job{
		Key:        "job",
		Locker:     l,
		Acquire:    backend.AcquireOptions{TTL: p.TTL, Holder: "tester:1", RunID: "run-1"},
		Policy:     p,
		BackendURL: "memory://",
		Path:       "/bin/sh",
		Args:       []string{"sh", "-c", script},
		Stdio:      [3]*os.File{null, out, out},
		Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock:      clock.Boot,
	}
}

// wantExit checks how a run ended: want is the command's status (0 for
// success) or the error the run's error must wrap; errSystem stands for
// an error that wraps none of the runner's or the backend's sentinels.
func wantExit(t *testing.T, err error, want any) error {
	t.Helper()
	switch want := want.(type) {
	case int:
		var exit *ExitError
		if want == 0 && err != nil || want != 0 && (!errors.As(err, &exit) || exit.Code != want) {
			t.Fatalf("Run = %v, want status %d", err, want)
		}
	case error:
		if want == errSystem {
			for _, s := range []error{ErrNotFound, ErrCannotExec, ErrMaxRun, ErrUnguarded, backend.ErrHeld, backend.ErrLost, backend.ErrUnavailable} {
				if errors.Is(err, s) {
					t.Fatalf("Run = %v, wraps %v; want a system error", err, s)
				}
			}
			if err == nil {
				t.Fatal("Run = nil, want a system error")
			}
		} else if !errors.Is(err, want) {
			t.Fatalf("Run = %v, want an error wrapping %v", err, want)
		}
	}
	return err
}

var errSystem = errors.New("a system error")

func assertFree(t *testing.T, b backend.Backend, key string) {
	t.Helper()
	st, err := b.Inspect(context.Background(), key)
	if err != nil || st.Held {
		t.Errorf("lock after the run: %+v, %v; want released", st, err)
	}
}

func TestChildStatusAndEnvironment(t *testing.T) {
	store := memory.New()
	envFile := filepath.Join(t.TempDir(), "env")
	t.Setenv("LOCKRUN_BACKEND", "redis://app:s3cret@cache:6379")
	t.Setenv("LOCKRUN_EXTRA", "from-parent")
	t.Setenv("KEEP_ME", "yes")
	job := testJob(t, store, "env > "+envFile+"; exit 3")
	wantExit(t, Run(t.Context(), job), 3)
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	last, _ := store.Inspect(t.Context(), "job")
	for _, want := range []string{"LOCKRUN_FENCING_TOKEN=" + last.Token.String() + "\n", "LOCKRUN_KEY=job\n", "LOCKRUN_HOLDER=tester:1\n", "LOCKRUN_RUN_ID=run-1\n", "LOCKRUN_TTL=1s\n", "LOCKRUN_BACKEND=memory://\n", "KEEP_ME=yes\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("child environment lacks %q", want)
		}
	}
	for _, leak := range []string{"s3cret", "LOCKRUN_EXTRA"} {
		if strings.Contains(env, leak) {
			t.Errorf("child environment contains %q", leak)
		}
	}
	assertFree(t, store, "job")
}

func TestDeathBySignalIs128PlusN(t *testing.T) {
	wantExit(t, Run(t.Context(), testJob(t, memory.New(), "kill -KILL $$")), 128+9)
}

func TestFailingRenewalsKillTheCommandBeforeTheDeadline(t *testing.T) {
	store := memory.New()
	store.FailRenewals(func(context.Context) error { return errors.New("link down") })
	// The shell ignores SIGTERM, so only SIGKILL at the kill deadline ends it.
	job := testJob(t, store, "trap '' TERM; while :; do sleep 0.05; done")
	begin := time.Now()
	exit := wantExit(t, Run(t.Context(), job), backend.ErrLost)
	took := time.Since(begin)
	if !errors.Is(exit, backend.ErrLost) {
		t.Errorf("lost-lock error %v does not wrap ErrLost", exit)
	}
	if deadline := job.Policy.Deadline(begin); !begin.Add(took).Before(deadline) {
		t.Errorf("command ended %v after the start, not before the local deadline %v", took, deadline.Sub(begin))
	}
	if term := job.Policy.TermAt(begin).Sub(begin); took < term {
		t.Errorf("command ended after %v, before the term deadline %v: a needless kill", took, term)
	}
}

func TestErrLostStopsTheCommandAtOnce(t *testing.T) {
	store := memory.New()
	store.FailRenewals(func(context.Context) error { return backend.ErrLost })
	job := testJob(t, store, "sleep 10")
	// A 6 s lease: its first renewal (2 s) and its term deadline (about
	// 5 s) are far enough apart that a loaded host cannot blur "at once"
	// into "at the deadline".
	p, err := heartbeat.NewPolicy(6 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	job.Policy, job.Acquire.TTL = p, p.TTL
	begin := time.Now()
	wantExit(t, Run(t.Context(), job), backend.ErrLost)
	if took, first := time.Since(begin), job.Policy.Interval; took > first+time.Second {
		t.Errorf("command stopped %v after the start; the first renewal said lost at %v, the term deadline is %v",
			took, first, job.Policy.TermAt(begin).Sub(begin))
	}
}

func TestLossReachesDescendantsThatLeftTheGroup(t *testing.T) {
	store := memory.New()
	store.FailRenewals(func(context.Context) error { return backend.ErrLost })
	pidFile := filepath.Join(t.TempDir(), "pid")
	job := testJob(t, store, "setsid sh -c 'echo $$ > "+pidFile+"; exec sleep 30' & sleep 30")
	begin := time.Now()
	wantExit(t, Run(t.Context(), job), backend.ErrLost)
	if took := time.Since(begin); took > job.Policy.TTL {
		t.Errorf("run took %v: a descendant outlived the %v lease", took, job.Policy.TTL)
	}
	assertDead(t, pidFile)
}

func TestLeftoversAreStoppedBeforeRelease(t *testing.T) {
	store := memory.New()
	pidFile := filepath.Join(t.TempDir(), "pid")
	job := testJob(t, store, "setsid sleep 30 & echo $! > "+pidFile)
	begin := time.Now()
	wantExit(t, Run(t.Context(), job), 0)
	if took := time.Since(begin); took > job.Policy.Grace+time.Second {
		t.Errorf("run took %v: the leftover was not stopped within the %v grace", took, job.Policy.Grace)
	}
	assertDead(t, pidFile)
	assertFree(t, store, "job")
}

func assertDead(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("descendant %d still exists after the run (kill 0: %v)", pid, err)
	}
}

func TestBusyAndTimeout(t *testing.T) {
	store := memory.New()
	held, err := store.Acquire(t.Context(), "job", backend.AcquireOptions{TTL: time.Minute, Holder: "other", RunID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(context.Background())
	marker := filepath.Join(t.TempDir(), "ran")
	job := testJob(t, store, "touch "+marker)
	exit := wantExit(t, Run(t.Context(), job), backend.ErrHeld)
	if !strings.Contains(exit.Error(), "other") {
		t.Errorf("busy error %q does not name the holder", exit)
	}
	job.Acquire.Wait, job.Timeout = true, 300*time.Millisecond
	begin := time.Now()
	wantExit(t, Run(t.Context(), job), backend.ErrHeld)
	if took := time.Since(begin); took < job.Timeout || took > job.Timeout+time.Second {
		t.Errorf("--timeout %v gave up after %v", job.Timeout, took)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran without the lock")
	}
}

// locker is a Locker whose Acquire is a function.
type locker func(ctx context.Context) (backend.Lease, error)

// TestFailOpenOnALocalBackendStartsItsGuards: a run on a local backend
// readies its cgroup and holds its watchdog back for the answer; an
// outage that lets it fail open is an answer too, and the command runs
// guarded instead of waiting for a watchdog that never starts.
func TestFailOpenOnALocalBackendStartsItsGuards(t *testing.T) {
	dir := t.TempDir()
	job := testJob(t, localFunc{locker(func(context.Context) (backend.Lease, error) {
		return nil, fmt.Errorf("%w: the disk is gone", backend.ErrUnavailable)
	})}, "echo ran > "+filepath.Join(dir, "ran"))
	job.Watchdog = testWatchdog(t)
	job.FailOpen = true
	done := make(chan error, 1)
	go func() { done <- Run(t.Context(), job) }()
	select {
	case err := <-done:
		wantExit(t, err, 0)
	case <-time.After(30 * time.Second):
		t.Fatal("a fail-open run on a local backend did not end: its watchdog never started")
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err != nil {
		t.Errorf("the command did not run: %v", err)
	}
}

// localFunc is a Locker on this machine, as the file backend is.
type localFunc struct{ Locker }

func (localFunc) Local() bool { return true }

// TestNoWatchdogForABusyAnswer: a run that does not wait starts no
// watchdog before the backend answers, a busy answer then costing none;
// on a backend on this machine it makes the command's cgroup meanwhile.
// Also on a host where no cgroup can be made (an unprivileged user
// without a delegated one), where making it fails at once.
func TestNoWatchdogForABusyAnswer(t *testing.T) {
	t.Run("cgroups", func(t *testing.T) { testNoWatchdogForABusyAnswer(t, newCgroup) })
	t.Run("no-cgroups", func(t *testing.T) {
		testNoWatchdogForABusyAnswer(t, func() (*cgroup, error) { return nil, fs.ErrPermission })
	})
}

func testNoWatchdogForABusyAnswer(t *testing.T, mk func() (*cgroup, error)) {
	var made atomic.Int32
	orig := makeCgroup
	makeCgroup = func() (*cgroup, error) { made.Add(1); return mk() }
	defer func() { makeCgroup = orig }()
	for _, local := range []bool{false, true} {
		made.Store(0)
		var kids []int
		var cgroups int32
		var l Locker = locker(func(context.Context) (backend.Lease, error) {
			time.Sleep(100 * time.Millisecond) // room for a watchdog to start
			kids, _ = procfs.Children(os.Getpid())
			cgroups = made.Load()
			return nil, &backend.HeldError{Status: backend.Status{Key: "job", Held: true}}
		})
		if local {
			l = localFunc{l}
		}
		job := testJob(t, l, "true")
		job.Watchdog = testWatchdog(t)
		wantExit(t, Run(t.Context(), job), backend.ErrHeld)
		if len(kids) > 0 {
			t.Errorf("local %v: children %v while the backend answered; want no watchdog before the answer", local, kids)
		}
		if (cgroups > 0) != local {
			t.Errorf("local %v: %d cgroups made while the backend answered; want the command's only on a local backend", local, cgroups)
		}
	}
}

func (f locker) Acquire(ctx context.Context, _ string, _ backend.AcquireOptions) (backend.Lease, error) {
	return f(ctx)
}

// grantingLocker is a local Locker that sees the options, as the file
// backend does.
type grantingLocker func(o backend.AcquireOptions) (backend.Lease, error)

func (f grantingLocker) Acquire(_ context.Context, _ string, o backend.AcquireOptions) (backend.Lease, error) {
	return f(o)
}

func (grantingLocker) Local() bool { return true }

// On a local backend the watchdog starts once the lock is taken
// (Granting), beside the grant's write; a write that then fails leaves no
// watchdog behind.
func TestWatchdogStartsWhenTheLockIsTaken(t *testing.T) {
	var during []int
	job := testJob(t, grantingLocker(func(o backend.AcquireOptions) (backend.Lease, error) {
		if o.Granting != nil {
			o.Granting()
		}
		for deadline := time.Now().Add(5 * time.Second); len(during) == 0 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
			during, _ = procfs.Children(os.Getpid())
		}
		return nil, fmt.Errorf("%w: writing the grant: the disk is read-only", backend.ErrPermission)
	}), "true")
	job.Watchdog = testWatchdog(t)
	wantExit(t, Run(t.Context(), job), backend.ErrPermission)
	if len(during) == 0 {
		t.Error("no watchdog started once the lock was taken")
	}
	if kids, _ := procfs.Children(os.Getpid()); len(kids) > 0 {
		t.Errorf("children %v left after a grant that failed", kids)
	}
}

func TestUnreachableBackendExits69AfterBoundedRetries(t *testing.T) {
	calls := 0
	job := testJob(t, locker(func(context.Context) (backend.Lease, error) {
		calls++
		return nil, backend.ErrUnavailable
	}), "true")
	begin := time.Now()
	wantExit(t, Run(t.Context(), job), backend.ErrUnavailable)
	if calls != connectAttempts || time.Since(begin) > 5*time.Second {
		t.Errorf("%d attempts in %v, want %d within seconds", calls, time.Since(begin), connectAttempts)
	}
}

// An acquire that fails slowly (a call that times out) is still one of a
// bounded run of failures when lockrun does not wait: exit 69, not retries
// for ever.
func TestSlowFailuresAreRetriedABoundedNumberOfTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		job := testJob(t, locker(func(context.Context) (backend.Lease, error) {
			if calls++; calls > 10 {
				return nil, errors.New("retried for ever")
			}
			time.Sleep(2 * waitedLong)
			return nil, backend.ErrUnavailable
		}), "true")
		_, err := acquire(t.Context(), job, make(chan os.Signal))
		wantExit(t, err, backend.ErrUnavailable)
		if calls != connectAttempts {
			t.Errorf("%d attempts, want %d", calls, connectAttempts)
		}
	})
}

// staleLease was granted a whole TTL before its reply arrived.
type staleLease struct {
	backend.Lease
	released *int
}

func (l staleLease) Start() time.Time                  { return time.Now().Add(-l.TTL()) }
func (l staleLease) Release(ctx context.Context) error { *l.released++; return nil }

func TestLateGrantNeverStartsTheCommand(t *testing.T) {
	store := memory.New()
	released := 0
	marker := filepath.Join(t.TempDir(), "ran")
	job := testJob(t, nil, "touch "+marker)
	job.Locker = locker(func(ctx context.Context) (backend.Lease, error) {
		store.Expire("job")
		l, err := store.Acquire(ctx, "job", job.Acquire)
		return staleLease{l, &released}, err
	})
	wantExit(t, Run(t.Context(), job), backend.ErrUnavailable)
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran on a lease that was already too old")
	}
	if released != connectAttempts {
		t.Errorf("%d late leases released, want %d", released, connectAttempts)
	}
}

func TestSignalsAreForwarded(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	job := testJob(t, memory.New(), "trap 'exit 7' USR1; touch "+ready+"; while :; do sleep 0.01; done")
	go func() {
		for range 500 {
			if _, err := os.Stat(ready); err == nil {
				syscall.Kill(os.Getpid(), syscall.SIGUSR1)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	wantExit(t, Run(t.Context(), job), 7)
}

// A run on a backend on this machine asks for its lock while the Go
// runtime enables the signals it forwards; they are caught by the time
// the command runs, or the command's signal would kill this test.
func TestSignalsAreCaughtBeforeTheCommandStarts(t *testing.T) {
	enable := enableSignals
	t.Cleanup(func() { enableSignals = enable })
	enableSignals = func(c chan<- os.Signal) {
		time.Sleep(100 * time.Millisecond)
		enable(c)
	}
	// Not caught, SIGUSR1 is lost (Go ignores it): the command ends with 0.
	job := testJob(t, localFunc{memory.New()}, "trap 'exit 7' USR1; kill -USR1 $PPID; for i in $(seq 300); do sleep 0.01; done")
	wantExit(t, Run(t.Context(), job), 7)
}

// A run killed by a signal it has not caught yet leaves no cgroup
// behind: prepare makes none until the signals are caught.
func TestNothingIsMadeBeforeTheSignalsAreCaught(t *testing.T) {
	made := make(chan struct{}, 1)
	mk := makeCgroup
	t.Cleanup(func() { makeCgroup = mk })
	makeCgroup = func() (*cgroup, error) {
		made <- struct{}{}
		return nil, errors.New("no cgroup in this test")
	}
	caught := make(chan struct{})
	p := prepare(nil, clock.Boot, false, caught)
	select {
	case <-made:
		t.Fatal("a cgroup was made before the signals were caught")
	case <-time.After(50 * time.Millisecond):
	}
	close(caught)
	<-p.ready
	select {
	case <-made:
	default:
		t.Fatal("no cgroup was made once the signals were caught")
	}
}

func TestCommandThatCannotStart(t *testing.T) {
	store := memory.New()
	job := testJob(t, store, "")
	job.Path, job.Args = "/nonexistent/cmd", []string{"cmd"}
	wantExit(t, Run(t.Context(), job), ErrNotFound)
	assertFree(t, store, "job")
	job.Path, job.Args = "/etc/passwd", []string{"/etc/passwd"}
	wantExit(t, Run(t.Context(), job), ErrCannotExec)
	assertFree(t, store, "job")
}

func TestResolve(t *testing.T) {
	if p, err := Resolve("sh"); err != nil || !filepath.IsAbs(p) {
		t.Errorf("Resolve(sh) = %q, %v", p, err)
	}
	for name, code := range map[string]error{"no-such-command-here": ErrNotFound, "/etc/passwd": ErrCannotExec, "/etc": ErrCannotExec} {
		_, err := Resolve(name)
		wantExit(t, err, code)
	}
}

// Only a missing command is 127 and only exec's refusal 126: a system out
// of processes or memory must not send the operator looking for a typo.
func TestStartErrorStatus(t *testing.T) {
	for err, code := range map[error]error{
		&fs.PathError{Op: "fork/exec", Path: "/x", Err: syscall.ENOENT}:  ErrNotFound,
		&fs.PathError{Op: "fork/exec", Path: "/x", Err: syscall.ENOTDIR}: ErrNotFound,
		&fs.PathError{Op: "fork/exec", Path: "/x", Err: syscall.EACCES}:  ErrCannotExec,
		&fs.PathError{Op: "fork/exec", Path: "/x", Err: syscall.ETXTBSY}: ErrCannotExec,
		&fs.PathError{Op: "fork/exec", Path: "/x", Err: syscall.E2BIG}:   ErrCannotExec,
		&fs.PathError{Op: "fork/exec", Path: "/x", Err: syscall.EAGAIN}:  errSystem,
		&fs.PathError{Op: "fork/exec", Path: "/x", Err: syscall.ENOMEM}:  errSystem,
		fmt.Errorf("becoming a child subreaper: %w", syscall.EINVAL):     errSystem,
	} {
		got := startError("x", err)
		wantExit(t, got, code)
		if code != ErrNotFound && !errors.Is(got, errors.Unwrap(err)) && !errors.Is(got, err) {
			t.Errorf("startError(%v) = %v: the cause is lost", err, got)
		}
	}
}

// A waiter prepares the command's cgroup and watchdog while it asks for
// the lock; one that gives up (here: a busy answer) leaves neither behind,
// however far the preparation had come.
func TestABusyRunLeavesNoGuards(t *testing.T) {
	t.Run("waiter", func(t *testing.T) { testBusyRunLeavesNoGuards(t, true, false) })
	t.Run("local", func(t *testing.T) { testBusyRunLeavesNoGuards(t, false, true) })
}

// testBusyRunLeavesNoGuards runs jobs that make their guards before the
// answer (a waiter's, or a run's on a local backend) and get a busy one.
func testBusyRunLeavesNoGuards(t *testing.T, wait, local bool) {
	busy := &backend.HeldError{Status: backend.Status{Key: "job", Held: true, Holder: "other"}}
	parent, cgErr := ownCgroup()
	ours := filepath.Join(parent, fmt.Sprintf("lockrun-%d-*", os.Getpid())) // not other test processes' runs
	for _, answer := range []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 50 * time.Millisecond} {
		var l Locker = locker(func(context.Context) (backend.Lease, error) {
			time.Sleep(answer)
			return nil, busy
		})
		if local {
			l = localFunc{l}
		}
		job := testJob(t, l, "true")
		job.Watchdog = testWatchdog(t)
		job.Acquire.Wait = wait
		wantExit(t, Run(t.Context(), job), backend.ErrHeld)
		if kids, _ := procfs.Children(os.Getpid()); len(kids) > 0 {
			t.Errorf("busy after %v: children %v left behind", answer, kids)
			for _, pid := range kids {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if cgErr != nil {
			continue // no cgroup to leave
		}
		if left, _ := filepath.Glob(ours); len(left) > 0 {
			t.Errorf("busy after %v: cgroups %v left behind", answer, left)
		}
	}
}
