package e2e_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
)

// Semaphores (run --limit N) through the binary, on every backend: two
// runs of --limit 2 hold the key at once and the third waits, or exits 75
// without --wait; another limit exits 78; status, list and release show
// and break each holder. A backend without semaphores fails here.
func TestSemaphoreOnEveryBackend(t *testing.T) {
	lockruntest.Binary(t)
	for _, srv := range everyBackend() {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			semaphoreScenario(t, withLockrun(t, envFor(srv.url(t))))
		})
	}
}

// semScript is a holder's command: it checks its fence, writes its token
// and the check's status to $1, and sleeps until it is stopped.
const semScript = `"$LR" fence check; echo "$LOCKRUN_FENCING_TOKEN $?" > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 60`

// semRun starts a lockrun of --limit 2 on key "sem" as holder, its stderr
// in a file; extra flags come first (6s of --ttl unless they set it). It
// returns the run, the path its command writes its token to, and its
// stderr's path.
func semRun(t *testing.T, e []string, holder string, extra ...string) (cmd *exec.Cmd, tokenFile, stderr string) {
	t.Helper()
	dir := t.TempDir()
	tokenFile, stderr = filepath.Join(dir, "token"), filepath.Join(dir, "stderr")
	f, err := os.Create(stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !slices.Contains(extra, "--ttl") {
		extra = append(extra, "--ttl", "6")
	}
	args := append(append([]string{"run", "--limit", "2", "--holder", holder}, extra...),
		"sem", "--", "sh", "-c", semScript, "sh", tokenFile)
	cmd = exec.Command(lockruntest.Binary(t), args...)
	cmd.Env, cmd.Stderr = e, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, tokenFile, stderr
}

// semToken waits for a holder's token and checks that its fence check,
// as one holder of several, passed; a holder whose lockrun ended first
// fails the test with what it said.
func semToken(t *testing.T, cmd *exec.Cmd, tokenFile, stderr string) uint64 {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(tokenFile); err == nil {
			tok, fence, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
			n, err := strconv.ParseUint(tok, 10, 64)
			if err != nil || fence != "0" {
				t.Fatalf("holder wrote %q; want its token and 0 from its fence check", b)
			}
			return n
		}
		if !alive(cmd.Process.Pid) || time.Now().After(deadline) {
			said, _ := os.ReadFile(stderr)
			t.Fatalf("%v: the holder's command never ran (lockrun alive %v, said %q)", cmd.Args[1:8], alive(cmd.Process.Pid), said)
		}
	}
}

// waitText waits up to 10s for path to contain text.
func waitText(t *testing.T, path, text string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), text) {
			return
		}
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("%s never said %q: %q", path, text, b)
}

// semStatus is status --json of a semaphore, as far as these tests read it.
type semStatus struct {
	Held    bool
	Limit   int
	Holders []struct {
		Holder string
		RunID  string `json:"run_id"`
		Token  uint64
	}
}

func semaphoreScenario(t *testing.T, e []string) {
	a, aFile, aErr := semRun(t, e, "slot-a")
	tokA := semToken(t, a, aFile, aErr)
	b, bFile, bErr := semRun(t, e, "slot-b")
	tokB := semToken(t, b, bFile, bErr)
	if tokB <= tokA {
		t.Fatalf("second holder's token %d is not above the first's %d", tokB, tokA)
	}

	r := run(t, e, "run", "--limit", "2", "sem", "--", "true")
	if r.Code != 75 || !strings.Contains(r.Stderr, "2 of 2") || strings.Count(r.Stderr, "\n") != 1 {
		t.Errorf("a third run on a full semaphore: exit %d, stderr %q; want 75 and one line saying 2 of 2", r.Code, r.Stderr)
	}
	for _, limit := range []string{"1", "3"} {
		began := time.Now()
		r := run(t, e, "run", "--limit", limit, "--wait", "sem", "--", "true")
		if r.Code != 78 || !strings.Contains(r.Stderr, "--limit 2") || strings.Count(r.Stderr, "\n") != 1 || time.Since(began) > 5*time.Second {
			t.Errorf("--limit %s --wait on a key held with --limit 2: exit %d after %v, stderr %q; want 78 at once, one line naming --limit 2",
				limit, r.Code, time.Since(began), r.Stderr)
		}
	}
	checkSemStatus(t, e, tokA, tokB)
	checkSemList(t, e)

	// The waiter waits longer than its own TTL: its lease is counted from
	// its grant, not from when it began to wait, so it runs at once.
	c, cFile, cErr := semRun(t, e, "slot-c", "--wait", "-v", "--ttl", "2")
	waitText(t, cErr, "waiting for lock")
	time.Sleep(3 * time.Second)
	r = run(t, e, "release", "sem")
	if r.Code != 64 || !strings.Contains(r.Stderr, "slot-a") || !strings.Contains(r.Stderr, "slot-b") || !strings.Contains(r.Stderr, "--holder") {
		t.Errorf("release of two holders without --holder or --all: exit %d, stderr %q; want 64 naming both", r.Code, r.Stderr)
	}
	releaseOne(t, e, runOf(t, e, "slot-a"), "slot-a", a)
	tokC := semToken(t, c, cFile, cErr)
	if tokC <= tokB {
		t.Errorf("the waiter's token %d is not above %d", tokC, tokB)
	}
	if said, _ := os.ReadFile(cErr); strings.Contains(string(said), "too late") || strings.Contains(string(said), "retrying") {
		t.Errorf("a waiter that waited past its TTL refused its grant: %s", said)
	}
	releaseOne(t, e, strconv.FormatUint(tokB, 10), "slot-b", b)
	if r := run(t, e, "release", "--holder", strconv.FormatUint(tokA, 10), "sem"); r.Code != 1 {
		t.Errorf("release --holder of a token no longer held: exit %d, %q %q; want 1", r.Code, r.Stdout, r.Stderr)
	}
	r = run(t, e, "release", "--all", "sem")
	if r.Code != 0 || !strings.Contains(r.Stdout, "released the lock of slot-c") {
		t.Errorf("release --all: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
	}
	if code := exitCode(t, c); code != 76 {
		t.Errorf("slot-c after release --all: exit %d, want 76", code)
	}
	if r := run(t, e, "status", "sem"); r.Code != 1 {
		t.Errorf("status after every holder was broken: exit %d, %q; want 1 (free)", r.Code, r.Stdout)
	}
	semLeftovers(t, e, tokC)
}

// runOf is the run id of holder, from status --json.
func runOf(t *testing.T, e []string, holder string) string {
	t.Helper()
	var s semStatus
	r := run(t, e, "status", "--json", "sem")
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil {
		t.Fatalf("status --json: %q: %v", r.Stdout, err)
	}
	for _, h := range s.Holders {
		if h.Holder == holder {
			return h.RunID
		}
	}
	t.Fatalf("status --json names no %s: %q", holder, r.Stdout)
	return ""
}

// releaseOne breaks one holder with --holder which, and checks that its
// lockrun stopped its command and exited 76.
func releaseOne(t *testing.T, e []string, which, holder string, cmd *exec.Cmd) {
	t.Helper()
	r := run(t, e, "release", "--holder", which, "sem")
	if r.Code != 0 || !strings.Contains(r.Stdout, "released the lock of "+holder) || strings.Count(r.Stdout, "released") != 1 {
		t.Fatalf("release --holder %s: exit %d, stdout %q, stderr %q; want 0 naming %s alone", which, r.Code, r.Stdout, r.Stderr, holder)
	}
	if code := exitCode(t, cmd); code != 76 {
		t.Errorf("%s after its release: exit %d, want 76", holder, code)
	}
}

func checkSemStatus(t *testing.T, e []string, tokA, tokB uint64) {
	t.Helper()
	r := run(t, e, "status", "sem")
	for _, want := range []string{"sem: 2 of 2 held\n", "held by slot-a (token " + strconv.FormatUint(tokA, 10), "held by slot-b (token " + strconv.FormatUint(tokB, 10)} {
		if r.Code != 0 || !strings.Contains(r.Stdout, want) {
			t.Errorf("status of a full semaphore: exit %d, %q; want %q", r.Code, r.Stdout, want)
		}
	}
	var s semStatus
	r = run(t, e, "status", "--json", "sem")
	if err := json.Unmarshal([]byte(r.Stdout), &s); err != nil || !s.Held || s.Limit != 2 || len(s.Holders) != 2 ||
		s.Holders[0].Token != tokA || s.Holders[1].Token != tokB || s.Holders[1].Holder != "slot-b" || s.Holders[1].RunID == "" {
		t.Errorf("status --json: %q (%v); want limit 2 and both holders, oldest first", r.Stdout, err)
	}
}

func checkSemList(t *testing.T, e []string) {
	t.Helper()
	r := run(t, e, "list", "sem")
	rows := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if r.Code != 0 || len(rows) != 3 || !strings.HasPrefix(rows[1], "sem ") || !strings.HasPrefix(rows[2], "sem ") ||
		!strings.HasSuffix(rows[1], " 2/2") || !strings.HasSuffix(rows[2], " 2/2") || !strings.Contains(r.Stdout, "slot-b") {
		t.Errorf("list sem: exit %d, %q; want a row per holder, each with 2/2", r.Code, r.Stdout)
	}
	var all []semStatus
	if r := run(t, e, "list", "--json", "sem"); json.Unmarshal([]byte(r.Stdout), &all) != nil || len(all) != 1 || len(all[0].Holders) != 2 || all[0].Limit != 2 {
		t.Errorf("list --json sem: %q; want one key with its two holders", r.Stdout)
	}
}

// semLeftovers: a semaphore run refuses checkpoints (64), logs its limit,
// and a plain lock after the semaphore goes on from its tokens.
func semLeftovers(t *testing.T, e []string, last uint64) {
	t.Helper()
	r := run(t, e, "run", "--limit", "2", "sem", "--", "sh", "-c", `"$LR" checkpoint set x`)
	if r.Code != 64 || !strings.Contains(r.Stderr, "is a semaphore (--limit 2)") || strings.Count(r.Stderr, "\n") != 1 {
		t.Errorf("checkpoint set in a semaphore run: exit %d, stderr %q; want 64, one line saying it is a semaphore", r.Code, r.Stderr)
	}
	r = run(t, e, "run", "--limit", "2", "-v", "--log-format", "json", "sem", "--", "true")
	acquired := false
	for _, ev := range events(t, r.Stderr) {
		acquired = acquired || ev["event"] == "acquired" && ev["limit"] == float64(2)
	}
	if !acquired {
		t.Errorf("no acquired event with limit 2 in %q", r.Stderr)
	}
	r = run(t, e, "run", "sem", "--", "sh", "-c", "echo $LOCKRUN_FENCING_TOKEN")
	if tok, err := strconv.ParseUint(strings.TrimSpace(r.Stdout), 10, 64); r.Code != 0 || err != nil || tok <= last {
		t.Errorf("a plain run after the semaphore: exit %d, token %q after %d, %s", r.Code, r.Stdout, last, r.Stderr)
	}
}

// On a terminal, release shows what it will break, one holder or all, and
// looks again after the answer: a holder gone meanwhile is not "broken".
func TestReleaseOfASemaphoreAsksOnATerminal(t *testing.T) {
	e := withLockrun(t, env(t))
	a, aFile, aErr := semRun(t, e, "slot-a")
	tokA := strconv.FormatUint(semToken(t, a, aFile, aErr), 10)
	b, bFile, bErr := semRun(t, e, "slot-b")
	semToken(t, b, bFile, bErr)

	term, tty := openTerminal(t)
	cmd := startOn(t, tty, e, "release", "--holder", tokA, "sem")
	term.waitFor(t, "held by slot-a (token "+tokA)
	term.waitFor(t, "Break this lock?")
	if r := run(t, e, "release", "--yes", "--holder", tokA, "sem"); r.Code != 0 {
		t.Fatalf("release --yes --holder: exit %d, %q", r.Code, r.Stderr)
	}
	term.master.WriteString("y\n")
	term.waitFor(t, "changed hands meanwhile")
	if code := exitCode(t, cmd); code != 2 {
		t.Errorf("release of a holder gone while asked: exit %d, want 2", code)
	}
	if code := exitCode(t, a); code != 76 {
		t.Errorf("slot-a: exit %d, want 76", code)
	}

	// The slot is free once slot-a's lockrun has stopped its command.
	c, cFile, cErr := semRun(t, e, "slot-c", "--timeout", "10")
	semToken(t, c, cFile, cErr)
	term, tty = openTerminal(t)
	cmd = startOn(t, tty, e, "release", "--all", "sem")
	term.waitFor(t, "Break all 2 holders?")
	term.master.WriteString("y\n")
	term.waitFor(t, "released the lock of slot-c")
	if code := exitCode(t, cmd); code != 0 {
		t.Errorf("release --all answered yes: exit %d", code)
	}
	for name, h := range map[string]*exec.Cmd{"slot-b": b, "slot-c": c} {
		if code := exitCode(t, h); code != 76 {
			t.Errorf("%s: exit %d, want 76", name, code)
		}
	}
}
