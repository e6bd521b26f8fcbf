package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/heartbeat"
	"github.com/lockrun/lockrun/internal/procfs"
)

// Fleet is a set of competitors, each running `lockrun run --wait` on the
// same key in a loop until the case ends.
type Fleet struct {
	Lockrun     string        // the binary under test
	Child       string        // the command it runs (this test binary)
	Backend     string        // backend URL, usually through a proxy
	Key         string        // the contested key
	TTL         time.Duration // --ttl
	Hold        time.Duration // how long each command writes
	Mode        string        // the child's mode: "", "stubborn", "escape"
	Competitors int
	// Busy are competitors more that run without --wait, as cron jobs on
	// many hosts do: each finds the lock busy (exit 75), or free between
	// two holders, and tries again busyPause later.
	Busy        int
	Env         []string // more environment for lockrun, e.g. a test hook
	BlockStderr bool     // lockrun's stderr is a full pipe that nobody reads
	Limit       int      // --limit: above 1, a semaphore
	Oracle      *Oracle

	mu       sync.Mutex
	attempts []*Attempt
}

// Attempt is one lockrun process as the harness saw it.
type Attempt struct {
	PID      int       // lockrun's pid
	Started  time.Time // just before lockrun was started
	Token    uint64    // 0 if it never got the lock
	Acquired time.Time // when lockrun logged the acquisition
	KillBy   time.Time // lockrun's kill deadline by its last log record (wall clock)
	Exit     int       // its exit status; -1 while running
	Ended    time.Time
	Log      []string // what it printed that was not a debug record
	Unblock  func()   // with BlockStderr: start reading lockrun's stderr
}

// Run runs the competitors until ctx ends, then waits for every lockrun
// to finish (or kills it after the TTL and a little more).
func (f *Fleet) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range f.Competitors + f.Busy {
		wait := i < f.Competitors
		wg.Go(func() {
			time.Sleep(time.Duration(i) * time.Millisecond)
			for ctx.Err() == nil {
				f.once(ctx, wait)
				if !wait {
					time.Sleep(busyPause)
				}
			}
		})
	}
	wg.Wait()
}

// busyPause is how long a Busy competitor waits between two tries: a
// loop of them without it would be a load of its own.
const busyPause = 50 * time.Millisecond

// once runs one lockrun to its end, with --wait when wait is set.
func (f *Fleet) once(ctx context.Context, wait bool) {
	args := []string{"run", "-v", "--log-format", "json"}
	if f.BlockStderr {
		args = args[:1] // warnings only: none comes before the command starts
	}
	if wait {
		args = append(args, "--wait", "--timeout", "20s") // --timeout alone would wait too
	}
	if f.Limit > 1 {
		args = append(args, "--limit", strconv.Itoa(f.Limit))
	}
	args = append(args, "--ttl", f.TTL.String(), "--backend", f.Backend, f.Key, "--", f.Child)
	cmd := exec.Command(f.Lockrun, args...)
	cmd.Env = append(os.Environ(), f.Env...)
	cmd.Env = append(cmd.Env, envOracle+"="+f.Oracle.Addr(), envHold+"="+f.Hold.String(), envMode+"="+f.Mode)
	a := &Attempt{Exit: -1, Unblock: func() {}}
	stderr, done, err := f.stderr(cmd, a)
	if err != nil {
		return
	}
	defer done()
	a.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return
	}
	a.PID = cmd.Process.Pid
	f.mu.Lock()
	f.attempts = append(f.attempts, a)
	f.mu.Unlock()
	// Once the case is over, every lockrun is told to stop (lockrun
	// forwards SIGTERM to its command); a command that ignores it is
	// killed, and lockrun ends as it would for any command. A stderr
	// that nobody read is read from then on.
	stop := context.AfterFunc(ctx, func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		time.AfterFunc(2*time.Second, func() {
			for _, pid := range procfs.Descendants(cmd.Process.Pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			a.Unblock()
		})
	})
	defer stop()
	if stderr != nil {
		f.read(a, stderr)
	} else {
		f.resolve(a)
	}
	f.ended(a, cmd.Wait())
}

// stderr gives cmd a stderr: a pipe that read follows or, with
// BlockStderr, a full pipe that nobody reads until a.Unblock. done
// releases what the parent holds once lockrun has been started and waited
// for.
func (f *Fleet) stderr(cmd *exec.Cmd, a *Attempt) (_ io.Reader, done func(), _ error) {
	if !f.BlockStderr {
		r, err := cmd.StderrPipe()
		return r, func() {}, err
	}
	r, w, err := fullPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = w
	var once sync.Once
	a.Unblock = func() {
		once.Do(func() {
			go func() { _, _ = io.Copy(io.Discard, r); r.Close() }()
		})
	}
	return nil, func() { w.Close(); a.Unblock() }, nil
}

// ended records how lockrun ended.
func (f *Fleet) ended(a *Attempt, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a.Ended, a.Exit = time.Now(), 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		a.Exit = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			a.Exit = 128 + int(ws.Signal())
		}
	}
}

// read follows lockrun's JSON log for the acquisition, and keeps the
// records that are not debug chatter.
func (f *Fleet) read(a *Attempt, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		var rec struct {
			Time   time.Time `json:"time"`
			Level  string    `json:"level"`
			Msg    string    `json:"msg"`
			Token  string    `json:"token"`
			Took   float64   `json:"took"`    // seconds
			KillBy float64   `json:"kill_by"` // seconds
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			f.note(a, line)
			continue
		}
		switch {
		case rec.Msg == "lock acquired":
			tok, _ := strconv.ParseUint(rec.Token, 10, 64)
			f.Oracle.Granted(tok)
			p, _ := heartbeat.NewPolicy(f.TTL)
			f.mu.Lock()
			a.Token, a.Acquired, a.KillBy = tok, rec.Time, p.KillAt(rec.Time.Add(-seconds(rec.Took)))
			f.mu.Unlock()
		case rec.Msg == "lease renewed":
			f.mu.Lock()
			a.KillBy = rec.Time.Add(seconds(rec.KillBy))
			f.mu.Unlock()
		case rec.Level != "DEBUG" || strings.Contains(line, "too late to run"):
			f.note(a, line)
		}
	}
}

// seconds is a duration of lockrun's JSON log, which gives them in seconds.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func (f *Fleet) note(a *Attempt, line string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a.Log = append(a.Log, line)
}

// Attempts returns a copy of every attempt so far.
func (f *Fleet) Attempts() []Attempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Attempt, len(f.attempts))
	for i, a := range f.attempts {
		out[i] = *a
	}
	return out
}

// attempt returns a copy of the attempt of the lockrun with pid.
func (f *Fleet) attempt(pid int) (Attempt, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range f.attempts {
		if a.PID == pid {
			return *a, true
		}
	}
	return Attempt{}, false
}

// Holder waits until some lockrun holds the lock and its command has
// started, and returns that lockrun and the command's run.
func (f *Fleet) Holder(ctx context.Context) (Attempt, life, error) {
	return f.HolderSince(ctx, time.Time{})
}

// HolderSince is Holder for a command that started after since.
func (f *Fleet) HolderSince(ctx context.Context, since time.Time) (Attempt, life, error) {
	for ctx.Err() == nil {
		for _, a := range f.Attempts() {
			if a.Token == 0 || a.Exit != -1 {
				continue
			}
			if l, ok := f.Oracle.lifeOf(a.Token); ok && l.end.IsZero() && l.start.After(since) {
				return a, l, nil
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return Attempt{}, life{}, fmt.Errorf("no holder with a running command: %w", ctx.Err())
}
