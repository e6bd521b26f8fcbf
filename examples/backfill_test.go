package examples

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/pgtest"
	"github.com/lockrun/lockrun/internal/procfs"
)

// backfillDB is the example's database: the lock backend's URL (a schema of
// its own on the shared server, initialised with lockrun init), and the
// environment in which psql finds the same schema.
type backfillDB struct {
	locks string
	env   []string
	conn  *pgx.Conn
}

func newBackfillDB(t *testing.T) *backfillDB {
	t.Helper()
	_, err := exec.LookPath("psql")
	backendtest.NeedServer(t, "psql (the PostgreSQL client)", err)
	locks := pgtest.Isolated(t, pgtest.Shared())
	u, _ := url.Parse(locks)
	schema, _, _ := strings.Cut(u.Query().Get("lockrun_table"), ".")
	db := &backfillDB{
		locks: locks,
		env: append(os.Environ(), "DATABASE_URL="+pgtest.Shared(), "PGOPTIONS=-c search_path="+schema,
			"PATH="+filepath.Dir(lockruntest.Binary(t))+":"+os.Getenv("PATH")),
	}
	if out, err := db.cmd(t, lockruntest.Binary(t), "init", "--backend", locks).CombinedOutput(); err != nil {
		t.Fatalf("lockrun init: %v\n%s", err, out)
	}
	if out, err := db.cmd(t, "psql", pgtest.Shared(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", "examples/fenced-backfill/schema.sql").CombinedOutput(); err != nil {
		t.Fatalf("schema.sql: %v\n%s", err, out)
	}
	c, err := pgx.Connect(t.Context(), pgtest.Shared())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	if _, err := c.Exec(t.Context(), "SET search_path = "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	db.conn = c
	return db
}

// cmd runs from the repository root in the database's environment.
func (db *backfillDB) cmd(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = ".."
	cmd.Env = db.env
	return cmd
}

// backfill is `lockrun run` of the example with lease ttl, its output in
// out. Only a test that waits out a frozen holder wants a short ttl: on a
// loaded host a 2 s lease can expire under a holder that is merely slow.
func (db *backfillDB) backfill(t *testing.T, out *bytes.Buffer, ttl string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"run", "--backend", db.locks, "--ttl", ttl}, extra...)
	args = append(args, "backfill-invoices", "--", "examples/fenced-backfill/backfill.sh")
	cmd := db.cmd(t, lockruntest.Binary(t), args...)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd
}

func (db *backfillDB) count(t *testing.T, sql string, args ...any) (n int) {
	t.Helper()
	if err := db.conn.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestFencedBackfillRunsEveryBatchOnce(t *testing.T) {
	db := newBackfillDB(t)
	var out bytes.Buffer
	if err := db.backfill(t, &out, "30s").Run(); err != nil {
		t.Fatalf("backfill: %v\n%s", err, &out)
	}
	db.wantEveryBatchOnce(t)
	out.Reset()
	if err := db.backfill(t, &out, "30s").Run(); err != nil || !strings.Contains(out.String(), "nothing left") {
		t.Fatalf("a second run, with a newer token, on a finished backfill: %v\n%s", err, &out)
	}
}

// wantEveryBatchOnce checks the end state: all 20 batches applied, each
// exactly once, every invoice converted once.
func (db *backfillDB) wantEveryBatchOnce(t *testing.T) {
	t.Helper()
	if n := db.count(t, "SELECT count(*) FROM invoices WHERE applied <> 1 OR amount_eur IS NULL"); n != 0 {
		t.Errorf("%d invoices not applied exactly once", n)
	}
	if n := db.count(t, "SELECT count(*) FROM backfill_log"); n != 20 {
		t.Errorf("backfill_log has %d lines, want one for each of the 20 batches", n)
	}
	if n := db.count(t, "SELECT count(DISTINCT batch) FROM backfill_log"); n != 20 {
		t.Errorf("backfill_log names %d distinct batches, want 20", n)
	}
}

// A holder frozen past its TTL (SIGSTOP of lockrun, its watchdog and its
// command: what a VM pause does) loses the lock to a second run, which
// finishes the backfill. Thawed, the first run's command goes on to its
// next batch: the database refuses it, and the first run fails loudly.
func TestFencedBackfillRefusesAFrozenHoldersLateWrite(t *testing.T) {
	db := newBackfillDB(t)
	var outA, outB bytes.Buffer
	a := db.backfill(t, &outA, "2s")
	a.Env = append(a.Env, "BACKFILL_PAUSE=0.1")
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { thaw(append(procfs.Descendants(a.Process.Pid), a.Process.Pid)); a.Process.Kill(); a.Wait() })
	for deadline := time.Now().Add(20 * time.Second); db.count(t, "SELECT count(*) FROM backfill_log") < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first run applied fewer than 3 batches in 20s:\n%s", &outA)
		}
	}
	frozen := freezeBetweenBatches(t, a.Process.Pid)
	byA := db.count(t, "SELECT count(*) FROM backfill_log")
	t.Logf("frozen after %d batches", byA)

	if err := db.backfill(t, &outB, "2s", "--wait").Run(); err != nil {
		t.Fatalf("the second run: %v\n%s", err, &outB)
	}
	db.wantEveryBatchOnce(t)

	thawCommand(t, a.Process.Pid, frozen)
	code := exitOf(t, a)
	// The checkpoint is set after its batch commits, so a freeze between
	// the two leaves it one batch behind the data: the data is the truth.
	if !strings.Contains(outB.String(), "last checkpoint: batch "+strconv.Itoa(byA)+"\n") &&
		!strings.Contains(outB.String(), "last checkpoint: batch "+strconv.Itoa(byA-1)+"\n") {
		t.Errorf("the second run did not read the first one's last checkpoint (batch %d or %d):\n%s", byA-1, byA, &outB)
	}
	if code == 0 || !strings.Contains(outA.String(), "LRF01") {
		t.Errorf("the thawed first run: exit %d, want non-zero with the database's refusal (LRF01):\n%s", code, &outA)
	}
	if n := db.count(t, "SELECT count(*) FROM backfill_log WHERE token = (SELECT min(token) FROM backfill_log)"); n != byA {
		t.Errorf("the first run applied %d batches, %d of them before it was frozen", n, byA)
	}
	db.wantEveryBatchOnce(t)
}

// freezeBetweenBatches stops lockrun (pid) and every descendant, at a
// moment when the command is between batches: a psql frozen inside its
// transaction would hold the fence's row lock (the second run would wait
// for it), and a 'lockrun checkpoint' would wait for its frozen lockrun.
func freezeBetweenBatches(t *testing.T, pid int) []int {
	t.Helper()
	for i := range 200 {
		pids := freezeTree(pid)
		if !busy(pid, pids) {
			t.Logf("frozen at attempt %d: %v", i, pids)
			return pids
		}
		thaw(pids)
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("never found the backfill between two batches")
	return nil
}

// freezeTree stops pid, then its descendants until no new one appears.
func freezeTree(pid int) []int {
	syscall.Kill(pid, syscall.SIGSTOP)
	pids := []int{pid}
	seen := map[int]bool{pid: true}
	for found := true; found; {
		found = false
		for _, d := range procfs.Descendants(pid) {
			if !seen[d] {
				seen[d], found = true, true
				syscall.Kill(d, syscall.SIGSTOP)
				pids = append(pids, d)
			}
		}
	}
	return pids
}

// thaw continues pids, the last first (lockrun, stopped first, goes last).
func thaw(pids []int) {
	for i := len(pids) - 1; i >= 0; i-- {
		syscall.Kill(pids[i], syscall.SIGCONT)
	}
}

// thawCommand continues the command's processes while lockrun and its
// watchdog stay frozen, waits for the command to end, then thaws the rest:
// the command gets to try its late write before lockrun can kill it.
func thawCommand(t *testing.T, lockrun int, frozen []int) {
	t.Helper()
	var command, keepers []int
	for _, p := range frozen {
		if p == lockrun || isWatchdog(p) {
			keepers = append(keepers, p)
		} else {
			command = append(command, p)
		}
	}
	thaw(command)
	for deadline := time.Now().Add(20 * time.Second); !allGone(command); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			break
		}
	}
	thaw(keepers)
}

// busy reports whether the command (any of pids but lockrun and its
// watchdog) is inside psql or a lockrun of its own.
func busy(lockrun int, pids []int) bool {
	for _, p := range pids {
		if p != lockrun && (named(p, "psql") || named(p, "lockrun") && !isWatchdog(p)) {
			return true
		}
	}
	return false
}

// isWatchdog reports whether pid is a lockrun watchdog: the watchdog
// program, or lockrun re-executed as one.
func isWatchdog(pid int) bool {
	_, ok := lockruntest.WatchdogArgs(pid)
	return ok
}

// named reports whether pid's command name (comm) is name.
func named(pid int, name string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.TrimSpace(string(b)) == name
}

// allGone reports whether every pid has exited (a zombie counts).
func allGone(pids []int) bool {
	for _, p := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			continue
		}
		if _, rest, ok := bytes.Cut(b, []byte(") ")); ok && len(rest) > 0 && rest[0] != 'Z' {
			return false
		}
	}
	return true
}

func exitOf(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the first run did not end within 30s of its thaw")
	}
	return cmd.ProcessState.ExitCode()
}
