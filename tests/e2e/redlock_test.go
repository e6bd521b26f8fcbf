package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// These tests run the binary against three private redis-servers as one
// Redlock set.

// redlockSet starts three masters and returns them with lockrun's
// environment for them (an ACL password in the URL, to check it is never
// printed), the restart wait turned off: masters just started would grant
// nothing for a TTL.
func redlockSet(t *testing.T) ([]*redistest.Server, []string) {
	servers, url := startMasters(t)
	return servers, append(os.Environ(), "LOCKRUN_BACKEND="+url+"?"+redistest.NoRestartWait)
}

// startMasters starts three masters and returns their URL, without
// parameters.
func startMasters(t *testing.T) ([]*redistest.Server, string) {
	var servers []*redistest.Server
	var addrs []string
	for range 3 {
		s := redistest.Start(t, "--requirepass", "hunter2")
		servers = append(servers, s)
		addrs = append(addrs, s.Addr())
	}
	return servers, "redlock://:hunter2@" + strings.Join(addrs, ",") + "/0"
}

// Masters that have just started (or restarted, maybe losing the copies of
// a lease whose holder still runs) grant nothing for the run's TTL, by
// default: a run that does not wait exits 75 with one line naming
// restart_wait; a waiter runs its command once the wait is over.
func TestRedlockStartedLatelyExits75ThenGrants(t *testing.T) {
	lockruntest.Binary(t) // built before the masters start
	started := time.Now()
	_, url := startMasters(t)
	e := withBackend(url)
	r := run(t, e, "run", "--ttl", "2s", "k", "--", "true")
	if r.Code != 75 || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, "restart_wait") || strings.Contains(r.Stderr, "hunter2") {
		t.Errorf("a run on masters started %v ago: exit %d, stderr %q; want 75 and one line naming restart_wait", time.Since(started), r.Code, r.Stderr)
	}
	r = run(t, e, "run", "-q", "--ttl", "2s", "--wait", "k", "--", "true")
	if took := time.Since(started); r.Code != 0 || took < 2*time.Second {
		t.Errorf("a waiter: exit %d after %v, stderr %q; want 0, not before 2s", r.Code, took, r.Stderr)
	}
}

func TestRedlockMajorityDownExits69AtStart(t *testing.T) {
	servers, e := redlockSet(t)
	if r := run(t, e, "run", "k", "--", "true"); r.Code != 0 {
		t.Fatalf("all masters up: exit %d, %s", r.Code, r.Stderr)
	}
	servers[0].Stop()
	if r := run(t, e, "run", "k", "--", "true"); r.Code != 0 {
		t.Errorf("one master down: exit %d, %s; want 0", r.Code, r.Stderr)
	}
	servers[1].Stop()
	begin := time.Now()
	r := run(t, e, "run", "k", "--", "true")
	if took := time.Since(begin); r.Code != 69 || strings.Count(r.Stderr, "\n") != 1 || strings.Contains(r.Stderr, "hunter2") || took > 3*time.Second {
		t.Errorf("majority down: exit %d after %v, stderr %q; want 69 within 3s, one line without the password", r.Code, took, r.Stderr)
	}
}

// When a majority of the masters stops answering while the command runs,
// the command is dead before any master could expire the lease; lockrun
// exits 76 and, once the masters are back, the next token is higher.
func TestRedlockLostMajorityKillsTheCommandBeforeExpiry(t *testing.T) {
	for _, f := range []struct {
		name        string
		apply, heal func(*redistest.Server)
	}{
		{"two masters frozen", (*redistest.Server).Freeze, (*redistest.Server).Thaw},
		{"two masters stopped", (*redistest.Server).Stop, (*redistest.Server).Restart},
	} {
		t.Run(f.name, func(t *testing.T) {
			servers, e := redlockSet(t)
			out := filepath.Join(t.TempDir(), "child")
			cmd := start(t, e, "run", "--ttl", "2s", "k", "--", "sh", "-c", "echo $LOCKRUN_FENCING_TOKEN $$ > "+out+"; exec sleep 60")
			var token uint64
			var pid int
			fmt.Sscan(waitFile(t, out), &token, &pid)
			expiry := redlockExpiryAfterARenewal(t, servers[2])
			f.apply(servers[0])
			f.apply(servers[1])
			for alive(pid) && time.Now().Before(expiry.Add(5*time.Second)) {
				time.Sleep(time.Millisecond)
			}
			margin := time.Until(expiry)
			f.heal(servers[0])
			f.heal(servers[1])
			if margin <= 0 {
				t.Errorf("the command died %v after a master could have expired its lease", -margin)
			}
			t.Logf("the command died %v before the lease could expire (ttl 2s)", margin.Round(time.Millisecond))
			if code := exitCode(t, cmd); code != 76 {
				t.Errorf("lockrun exit %d, want 76", code)
			}
			r := run(t, e, "run", "k", "--", "sh", "-c", "echo $LOCKRUN_FENCING_TOKEN")
			if next, _ := strconv.ParseUint(strings.TrimSpace(r.Stdout), 10, 64); r.Code != 0 || next <= token {
				t.Errorf("next holder: exit %d, token %q after %d (%s)", r.Code, r.Stdout, token, r.Stderr)
			}
		})
	}
}

// redlockExpiryAfterARenewal waits until the holder has just renewed "k"
// on srv and returns the earliest time srv could expire it (no master
// counts the lease from before the renewal was sent), with the next
// renewal far enough off that a fault applied now precedes it.
func redlockExpiryAfterARenewal(t *testing.T, srv *redistest.Server) time.Time {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), Password: "hunter2"})
	defer c.Close()
	last := time.Duration(1<<63 - 1)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		before := time.Now() // the server reads its clock after this
		pttl, err := c.PTTL(t.Context(), "lockrun:{k}:lock").Result()
		if err != nil || pttl < 0 {
			t.Fatalf("PTTL of the held lock: %v, %v", pttl, err)
		}
		if pttl > last {
			return before.Add(pttl)
		}
		last = pttl
	}
	t.Fatal("the holder did not renew within 10s")
	return time.Time{}
}

// status and release work on a Redlock set: the revoked holder stops its
// command and exits 76 within its TTL, and a --wait run queued behind it
// goes next.
func TestRedlockStatusReleaseAndWait(t *testing.T) {
	_, e := redlockSet(t)
	ready := filepath.Join(t.TempDir(), "ready")
	holder := start(t, e, "run", "--ttl", "2s", "--holder", "worker-7", "k", "--", "sh", "-c", "echo > "+ready+"; exec sleep 60")
	waitFile(t, ready)
	if r := run(t, e, "status", "k"); r.Code != 0 || !strings.Contains(r.Stdout, "held by worker-7") {
		t.Errorf("status: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
	}
	waiter := start(t, e, "run", "--wait", "k", "--", "true")
	begin := time.Now()
	if r := run(t, e, "release", "k"); r.Code != 0 {
		t.Fatalf("release: exit %d, %s", r.Code, r.Stderr)
	}
	if code := exitCode(t, holder); code != 76 || time.Since(begin) > 2*time.Second {
		t.Errorf("revoked holder: exit %d after %v; want 76 within its 2s ttl", code, time.Since(begin))
	}
	if code := exitCode(t, waiter); code != 0 {
		t.Errorf("waiter: exit %d", code)
	}
}
