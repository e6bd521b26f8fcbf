package e2e_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend/redis"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/redistest"
)

// These tests run the real lockrun binary against a private redis-server.

// withBackend is the test's environment with LOCKRUN_BACKEND set to url.
func withBackend(url string) []string { return append(os.Environ(), "LOCKRUN_BACKEND="+url) }

func TestRedisDownExits69WithOneLine(t *testing.T) {
	url := fmt.Sprintf("redis://app:hunter2@127.0.0.1:%d/0", backendtest.FreePort(t))
	lockruntest.Binary(t) // built before the clock starts
	begin := time.Now()
	r := lockruntest.Run(t, withBackend(url), "run", "k", "--", "true")
	took := time.Since(begin)
	if r.Code != 69 || strings.Count(r.Stderr, "\n") != 1 || strings.Contains(r.Stderr, "hunter2") || took > 3*time.Second {
		t.Errorf("server down: exit %d after %v, stderr %q; want 69 within 3s and one line without the password", r.Code, took, r.Stderr)
	}
}

// A server that has just started (or restarted, maybe losing a lock whose
// holder still runs) grants nothing for the run's TTL, by default: a run
// that does not wait exits 75 with one line that says why and for how
// long; a waiter runs its command once the wait is over.
func TestRedisStartedLatelyExits75ThenGrants(t *testing.T) {
	lockruntest.Binary(t) // built before the server starts
	started := time.Now()
	srv := redistest.Start(t)
	env := withBackend("redis://" + srv.Addr() + "/0")
	r := lockruntest.Run(t, env, "run", "--ttl", "2s", "k", "--", "true")
	if r.Code != 75 || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, "the server started about") || !strings.Contains(r.Stderr, "restart_wait") {
		t.Errorf("a run on a server started %v ago: exit %d, stderr %q; want 75 and one line naming the start and restart_wait", time.Since(started), r.Code, r.Stderr)
	}
	r = lockruntest.Run(t, env, "run", "-q", "--ttl", "2s", "--wait", "k", "--", "true")
	if took := time.Since(started); r.Code != 0 || took < 2*time.Second {
		t.Errorf("a waiter: exit %d after %v (%s); want 0, after 2s", r.Code, took, r.Stderr)
	}
}

// When the server stops answering while the command runs, the command is
// dead before the server could expire the lease and grant the lock to
// someone else; lockrun exits 76 and the next holder's token is higher.
func TestRedisFaultKillsTheCommandBeforeTheLeaseCanExpire(t *testing.T) {
	faults := []struct {
		name        string
		apply, heal func(*redistest.Server, *netproxy.Proxy)
	}{
		{"server frozen", func(s *redistest.Server, _ *netproxy.Proxy) { s.Freeze() }, func(s *redistest.Server, _ *netproxy.Proxy) { s.Thaw() }},
		{"requests held", func(_ *redistest.Server, p *netproxy.Proxy) { p.Hold(netproxy.Up) }, func(_ *redistest.Server, p *netproxy.Proxy) { p.Heal() }},
		{"replies held", func(_ *redistest.Server, p *netproxy.Proxy) { p.Hold(netproxy.Down) }, func(_ *redistest.Server, p *netproxy.Proxy) { p.Heal() }},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			srv := redistest.Start(t)
			proxy := netproxy.Start(t, srv.Addr())
			env := withBackend("redis://" + proxy.Addr() + "/0?" + redistest.NoRestartWait)
			out := filepath.Join(t.TempDir(), "child")
			cmd := lockruntest.Start(t, env, "run", "--ttl", "2s", "k", "--", "sh", "-c", "echo $LOCKRUN_FENCING_TOKEN $$ > "+out+"; exec sleep 60")
			var token uint64
			var pid int
			fmt.Sscan(lockruntest.WaitLine(t, out), &token, &pid)

			expiry := expiryAfterARenewal(t, srv, "k")
			f.apply(srv, proxy)
			for lockruntest.Alive(pid) && time.Now().Before(expiry.Add(5*time.Second)) {
				time.Sleep(time.Millisecond)
			}
			margin := time.Until(expiry)
			f.heal(srv, proxy)
			if margin <= 0 {
				t.Errorf("the command died %v after the server could have expired its lease", -margin)
			}
			t.Logf("the command died %v before the lease could expire (ttl 2s)", margin.Round(time.Millisecond))
			if code := lockruntest.ExitCode(t, cmd); code != 76 {
				t.Errorf("lockrun exit %d, want 76", code)
			}
			r := lockruntest.Run(t, env, "run", "k", "--", "sh", "-c", "echo $LOCKRUN_FENCING_TOKEN")
			if next, _ := strconv.ParseUint(strings.TrimSpace(r.Stdout), 10, 64); r.Code != 0 || next <= token {
				t.Errorf("next holder: exit %d, token %q after %d (%s)", r.Code, r.Stdout, token, r.Stderr)
			}
		})
	}
}

// expiryAfterARenewal waits until the holder has just renewed key and
// returns the earliest time the server could expire it, with the next
// renewal far enough off that a fault applied now precedes it. It reads
// the lease's time left as lockrun status does (the backend's Inspect).
func expiryAfterARenewal(t *testing.T, srv *redistest.Server, key string) time.Time {
	t.Helper()
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	b, err := redis.OpenURL(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	last := time.Duration(1<<63 - 1)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		before := time.Now() // the server reads its clock after this
		st, err := b.Inspect(t.Context(), key)
		if err != nil || !st.Held || st.TTL <= 0 {
			t.Fatalf("Inspect of the held lock: %+v, %v", st, err)
		}
		if st.TTL > last {
			return before.Add(st.TTL)
		}
		last = st.TTL
		time.Sleep(time.Millisecond)
	}
	t.Fatal("the holder did not renew within 10s")
	return time.Time{}
}

// status and release work on Redis: the revoked holder stops its command
// and exits 76 within its TTL, and a --wait run queued behind it goes next.
func TestRedisStatusReleaseAndWait(t *testing.T) {
	srv := redistest.Start(t)
	env := withBackend(srv.URL())
	ready := filepath.Join(t.TempDir(), "ready")
	holder := lockruntest.Start(t, env, "run", "--ttl", "2s", "--holder", "worker-7", "k", "--", "sh", "-c", "echo > "+ready+"; exec sleep 60")
	lockruntest.WaitLine(t, ready)
	if r := lockruntest.Run(t, env, "status", "k"); r.Code != 0 || !strings.Contains(r.Stdout, "held by worker-7") {
		t.Errorf("status: exit %d, %q %q", r.Code, r.Stdout, r.Stderr)
	}
	waiter := lockruntest.Start(t, env, "run", "--wait", "k", "--", "true")
	begin := time.Now()
	if r := lockruntest.Run(t, env, "release", "k"); r.Code != 0 {
		t.Fatalf("release: exit %d, %s", r.Code, r.Stderr)
	}
	if code := lockruntest.ExitCode(t, holder); code != 76 || time.Since(begin) > 2*time.Second {
		t.Errorf("revoked holder: exit %d after %v; want 76 within its 2s ttl", code, time.Since(begin))
	}
	if code := lockruntest.ExitCode(t, waiter); code != 0 {
		t.Errorf("waiter: exit %d", code)
	}
}
