package e2e_test

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend/etcd"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/netproxy"
)

// These tests run the lockrun binary against a real etcd.

// etcdQueue is the prefix of key's queue: the entries of its holder and waiters.
func etcdQueue(key string) string { return etcd.DefaultPrefix + key + "/" }

func TestEtcdDownExits69AtOnce(t *testing.T) {
	srv := etcdtest.Start(t)
	srv.Stop()
	lockruntest.Binary(t) // built before the clock starts
	begin := time.Now()
	r := lockruntest.Run(t, nil, "run", "-b", srv.URL(), "k", "--", "true")
	took := time.Since(begin)
	if r.Code != 69 || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, "connection refused") || took > 3*time.Second {
		t.Errorf("etcd down: exit %d after %v, stderr %q; want 69 within 3s (0.6s of probe retries plus slack for a loaded machine), one line", r.Code, took, r.Stderr)
	}
}

// cutAndMeasure cuts lockrun off from etcd with cut right after a renewal,
// and checks that the child is dead before the lease can expire on the
// server, the renewal's send time plus the TTL, and that lockrun exits 76.
func cutAndMeasure(t *testing.T, url string, cut func()) uint64 {
	t.Helper()
	const ttl = 2 * time.Second
	cmd, pid, tok, renewed := holdRenewing(t, url, "k", "--ttl", ttl.String(), "--heartbeat", "500ms")
	sent := latest(<-renewed, renewed) // on a loaded machine, renewals queue up before the test reads them
	cut()
	cutAt := time.Now()
	for lockruntest.Alive(pid) && time.Since(cutAt) < 2*ttl {
		time.Sleep(time.Millisecond)
	}
	dead := time.Now()
	sent = latest(sent, renewed) // one sent just before the cut may have succeeded
	expiry := sent.Add(ttl)
	if !dead.Before(expiry) {
		t.Errorf("child dead %v after the last renewal was sent: not before the lease could expire (%v)", dead.Sub(sent), ttl)
	}
	t.Logf("child dead %v after the cut, %v after the last renewal was sent; %v before the earliest expiry",
		dead.Sub(cutAt).Round(time.Millisecond), dead.Sub(sent).Round(time.Millisecond), expiry.Sub(dead).Round(time.Millisecond))
	if code := lockruntest.ExitCode(t, cmd); code != 76 {
		t.Errorf("lockrun exit %d, want 76 (lock lost)", code)
	}
	return tok
}

func TestEtcdFrozenKillsTheChildBeforeExpiry(t *testing.T) {
	srv := etcdtest.Start(t)
	tok := cutAndMeasure(t, srv.URL(), srv.Freeze)
	srv.Thaw()
	r := lockruntest.Run(t, nil, "run", "-b", srv.URL(), "--timeout", "10s", "k", "--", "sh", "-c", "echo $LOCKRUN_FENCING_TOKEN")
	if next, err := strconv.ParseUint(strings.TrimSpace(r.Stdout), 10, 64); r.Code != 0 || err != nil || next <= tok {
		t.Errorf("next holder: exit %d, token %q after %d (%s)", r.Code, r.Stdout, tok, r.Stderr)
	}
}

func TestEtcdPartitionKillsTheChildBeforeExpiry(t *testing.T) {
	srv := etcdtest.Start(t)
	proxy := netproxy.Start(t, srv.Addr())
	cutAndMeasure(t, "etcd://"+proxy.Addr(), func() { proxy.Hold(netproxy.Both) })
}

// A member that loses the majority answers no keep-alive (lockrun asks
// for a leader), and no read: the command of a lockrun connected to it
// dies before the lease could expire, and once the majority is back the
// next holder gets a higher token.
func TestEtcdMemberWithoutALeaderKillsTheChildBeforeExpiry(t *testing.T) {
	m := etcdtest.StartCluster(t, 3)
	tok := cutAndMeasure(t, m[2].URL(), func() { m[0].Freeze(); m[1].Freeze() })
	m[0].Thaw()
	m[1].Thaw()
	m[2].WaitReady()
	urls := "etcd://" + m[0].Addr() + "," + m[1].Addr() + "," + m[2].Addr()
	r := lockruntest.Run(t, nil, "run", "-b", urls, "--timeout", "10s", "k", "--", "sh", "-c", "echo $LOCKRUN_FENCING_TOKEN")
	if next, err := strconv.ParseUint(strings.TrimSpace(r.Stdout), 10, 64); r.Code != 0 || err != nil || next <= tok {
		t.Errorf("next holder: exit %d, token %q after %d (%s)", r.Code, r.Stdout, tok, r.Stderr)
	}
}

func TestEtcdWaitersLeaveNoEntry(t *testing.T) {
	srv := etcdtest.Start(t)
	c, key := srv.Client(t), backendtest.Key(t)
	ready := filepath.Join(t.TempDir(), "ready")
	lockruntest.Start(t, nil, "run", "-b", srv.URL(), key, "--", "sh", "-c", "echo > "+ready+"; sleep 30")
	lockruntest.WaitLine(t, ready)

	waiter := lockruntest.Start(t, nil, "run", "-b", srv.URL(), "--ttl", "1s", "--wait", key, "--", "true")
	etcdtest.WaitQueued(t, c, etcdQueue(key), 2)
	killed := time.Now()
	waiter.Process.Signal(syscall.SIGKILL)
	etcdtest.WaitQueued(t, c, etcdQueue(key), 1) // within 5s; the lease is 1s, checked every 0.5s by etcd
	if d := time.Since(killed); d > 2*time.Second {
		t.Errorf("killed waiter's entry lasted %v with a 1s lease", d)
	}

	r := lockruntest.Run(t, nil, "run", "-b", srv.URL(), "--timeout", "300ms", key, "--", "true")
	if n := etcdtest.Entries(t, c, etcdQueue(key)); r.Code != 75 || len(n) != 1 {
		t.Errorf("waiter that timed out: exit %d, queue %v; want 75 and the holder's entry alone at once", r.Code, n)
	}
}

// TestEtcdctlLockOutlivesItsLease shows the flaw lockrun fixes: cut off
// from etcd, `etcdctl lock` keeps its command running after its lease has
// expired and the lock is free for the next holder.
func TestEtcdctlLockOutlivesItsLease(t *testing.T) {
	srv := etcdtest.Start(t)
	proxy := netproxy.Start(t, srv.Addr())
	c, key, pidFile := srv.Client(t), backendtest.Key(t), filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command("etcdctl", "--endpoints", proxy.Addr(), "lock", "--ttl", "1", etcd.DefaultPrefix+key, "--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 30")
	if err := cmd.Start(); err != nil {
		t.Fatalf("etcdctl: %v (run .ci/services.sh)", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid, _ := strconv.Atoi(lockruntest.WaitLine(t, pidFile))
	proxy.Hold(netproxy.Both)
	etcdtest.WaitQueued(t, c, etcdQueue(key), 0) // the lease expired on the server
	if !lockruntest.Alive(pid) {
		t.Fatal("etcdctl lock's command died with its lease; this test documents that it does not")
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

// lockrun's etcd keys are those of etcd's concurrency.Mutex under the URL's
// prefix, so `lockrun run K` and `etcdctl lock /lockrun/K` exclude each
// other, both ways; `etcdctl lock K` names another lock and excludes
// neither (docs/backends/etcd.md says so).
func TestEtcdctlLockExcludesOnlyTheWholeKey(t *testing.T) {
	srv := etcdtest.Start(t)
	etcdctl := func(name string, args ...string) *exec.Cmd {
		return exec.Command("etcdctl", append([]string{"--endpoints", srv.Addr(), "lock", name, "--"}, args...)...)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	holder := lockruntest.Start(t, nil, "run", "-b", srv.URL(), "K", "--", "sh", "-c", "echo > "+ready+"; sleep 2")
	lockruntest.WaitLine(t, ready)
	if out, err := etcdctl("K", "true").CombinedOutput(); err != nil {
		t.Errorf("etcdctl lock K beside lockrun run K: %v %s; want it granted at once", err, out)
	}
	whole := etcdctl(etcd.DefaultPrefix+"K", "true")
	if err := whole.Start(); err != nil {
		t.Fatalf("etcdctl: %v (run .ci/services.sh)", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- whole.Wait() }()
	select {
	case err := <-exited:
		t.Errorf("etcdctl lock /lockrun/K ran while lockrun held K (%v)", err)
	case <-time.After(500 * time.Millisecond):
	}
	lockruntest.ExitCode(t, holder)
	if err := <-exited; err != nil {
		t.Errorf("etcdctl lock /lockrun/K after lockrun's release: %v", err)
	}

	for _, c := range []struct {
		name string
		want int
	}{{"K", 0}, {etcd.DefaultPrefix + "K", 75}} {
		name, want := c.name, c.want
		pidFile := filepath.Join(t.TempDir(), "pid")
		other := etcdctl(name, "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 30")
		if err := other.Start(); err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(lockruntest.WaitLine(t, pidFile))
		if r := lockruntest.Run(t, nil, "run", "-b", srv.URL(), "K", "--", "true"); r.Code != want {
			t.Errorf("lockrun run K while etcdctl lock %s holds: exit %d (%s), want %d", name, r.Code, r.Stderr, want)
		}
		syscall.Kill(pid, syscall.SIGKILL) // etcdctl unlocks once its command is gone
		other.Wait()
	}
}
