package e2e_test

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/zktest"
)

// These tests run the lockrun binary against real ZooKeeper servers.

func TestZooKeeperDownExits69AtOnce(t *testing.T) {
	srv := zktest.Start(t)
	srv.Stop()
	lockruntest.Binary(t) // built before the clock starts
	begin := time.Now()
	r := run(t, nil, "run", "-b", srv.URL(), "k", "--", "true")
	took := time.Since(begin)
	if r.Code != 69 || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, "connection refused") || took > 3*time.Second {
		t.Errorf("ZooKeeper down: exit %d after %v, stderr %q; want 69 within 3s (0.6s of probe retries plus slack for a loaded machine), one line", r.Code, took, r.Stderr)
	}
}

// zkCutAndMeasure cuts lockrun off with cut right after a renewal and
// checks that the child is dead before the session can expire (the
// renewal's send time plus the TTL) and that lockrun exits 76. After heal,
// a second lockrun on next gets the lock with a higher token.
func zkCutAndMeasure(t *testing.T, url, next string, cut, heal func()) {
	t.Helper()
	const ttl = 2 * time.Second
	key := backendtest.Key(t)
	cmd, pid, tok, renewed := holdRenewing(t, url, key, "--ttl", ttl.String(), "--heartbeat", "500ms")
	sent := <-renewed
	cut()
	cutAt := time.Now()
	for alive(pid) && time.Since(cutAt) < 2*ttl {
		time.Sleep(time.Millisecond)
	}
	dead := time.Now()
	if expiry := sent.Add(ttl); !dead.Before(expiry) {
		t.Errorf("child dead %v after the last renewal was sent: not before the session could expire (%v)", dead.Sub(sent), ttl)
	}
	t.Logf("child dead %v after the cut, %v after the last renewal was sent", dead.Sub(cutAt).Round(time.Millisecond), dead.Sub(sent).Round(time.Millisecond))
	if code := exitCode(t, cmd); code != 76 {
		t.Errorf("lockrun exit %d, want 76 (lock lost)", code)
	}
	heal()
	r := run(t, nil, "run", "-b", next, "--ttl", "2s", "--timeout", "20s", key, "--", "sh", "-c", "echo $LOCKRUN_FENCING_TOKEN")
	if n, err := strconv.ParseUint(strings.TrimSpace(r.Stdout), 10, 64); r.Code != 0 || err != nil || n <= tok {
		t.Errorf("next holder: exit %d, token %q after %d (%s)", r.Code, r.Stdout, tok, r.Stderr)
	}
}

func TestZooKeeperLinkCutKillsTheChildBeforeExpiry(t *testing.T) {
	srv := zktest.Start(t)
	proxy := netproxy.Start(t, srv.Addr())
	zkCutAndMeasure(t, zktest.URL(proxy.Addr()), srv.URL(), func() { proxy.Hold(netproxy.Both) }, func() {})
}

func TestZooKeeperFrozenServerKillsTheChildBeforeExpiry(t *testing.T) {
	srv := zktest.Start(t)
	zkCutAndMeasure(t, srv.URL(), srv.URL(), srv.Freeze, srv.Thaw)
}

// A member cut off from the majority stops serving: the command of a
// lockrun connected to it alone dies before its session could expire, and
// the majority's next holder gets a higher token.
func TestZooKeeperMemberWithoutQuorumKillsTheChildBeforeExpiry(t *testing.T) {
	m := zktest.StartEnsemble(t, 3)
	leader := zktest.Leader(t, m, 10*time.Second)
	var lone *zktest.Server
	for _, s := range m {
		if s != leader {
			lone = s
		}
	}
	var majority []*zktest.Server
	var addrs []string
	for _, s := range m {
		if s != lone {
			majority = append(majority, s)
			addrs = append(addrs, s.Addr())
		}
	}
	zkCutAndMeasure(t, lone.URL(), zktest.URL(addrs...), func() {
		for _, s := range majority {
			s.Freeze()
		}
	}, func() {
		for _, s := range majority {
			s.Thaw()
		}
		zktest.WaitQuorum(t, majority...)
	})
}

// Killing the leader while lockrun talks to the whole ensemble: the
// session moves to a surviving member and stays, and the command runs on
// to its end with exit 0.
func TestZooKeeperLeaderLossKeepsTheLock(t *testing.T) {
	m := zktest.StartEnsemble(t, 3)
	leader := zktest.Leader(t, m, 10*time.Second)
	url := zktest.URL(m[0].Addr(), m[1].Addr(), m[2].Addr())
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := start(t, nil, "run", "-b", url, "--ttl", "6s", backendtest.Key(t), "--", "sh", "-c", "echo > "+ready+"; sleep 6")
	waitFile(t, ready)
	leader.Stop()
	if code := exitCode(t, cmd); code != 0 {
		t.Errorf("lockrun exit %d after the leader was killed; want 0: the session survives a new election", code)
	}
}

// zkQueue counts the contender nodes of key.
func zkQueue(t *testing.T, c *zk.Conn, key string) int {
	t.Helper()
	kids, _, err := c.Children("/lockrun/" + key)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		t.Fatal(err)
	}
	return len(kids)
}

// zkWaitQueue waits up to 5 s for key's queue to have n nodes.
func zkWaitQueue(t *testing.T, c *zk.Conn, key string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); zkQueue(t, c, key) != n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("queue of %s has %d nodes, want %d", key, zkQueue(t, c, key), n)
		}
	}
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// A killed waiter's node goes with its session (the TTL plus a tick), and
// a waiter that times out removes its node at once.
func TestZooKeeperWaitersLeaveNoNode(t *testing.T) {
	srv := zktest.Start(t)
	c, _, err := zk.Connect([]string{srv.Addr()}, 5*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	key, ready := backendtest.Key(t), filepath.Join(t.TempDir(), "ready")
	start(t, nil, "run", "-b", srv.URL(), key, "--", "sh", "-c", "echo > "+ready+"; sleep 30")
	waitFile(t, ready)
	waiter := start(t, nil, "run", "-b", srv.URL(), "--ttl", "1s", "--wait", key, "--", "true")
	zkWaitQueue(t, c, key, 2)
	killed := time.Now()
	waiter.Process.Signal(syscall.SIGKILL)
	zkWaitQueue(t, c, key, 1)
	if d := time.Since(killed); d > 2*time.Second+zktest.TickTime {
		t.Errorf("killed waiter's node lasted %v with a 1s lease (session 1s plus a tick)", d)
	}
	r := run(t, nil, "run", "-b", srv.URL(), "--timeout", "300ms", key, "--", "true")
	if n := zkQueue(t, c, key); r.Code != 75 || n != 1 {
		t.Errorf("waiter that timed out: exit %d, queue %d; want 75 and the holder's node alone at once", r.Code, n)
	}
}

// The majority goes on without lockrun: cut off (a proxy holds its link
// to its one member), its session expires at the leader and a waiter on
// the other members takes the lock. The waiter's command must start only
// after the first command is dead, and with a higher token.
func TestZooKeeperPartitionedHolderDiesBeforeTheMajorityGrants(t *testing.T) {
	m := zktest.StartEnsemble(t, 3)
	proxy := netproxy.Start(t, m[0].Addr())
	key, dir := backendtest.Key(t), t.TempDir()
	cmd, pid, tok, renewed := holdRenewing(t, zktest.URL(proxy.Addr()), key, "--ttl", "2s", "--heartbeat", "500ms")
	started, tokFile := filepath.Join(dir, "started"), filepath.Join(dir, "token")
	waiter := start(t, nil, "run", "-b", zktest.URL(m[1].Addr(), m[2].Addr()), "--ttl", "2s", "--wait", key, "--",
		"sh", "-c", "date +%s%N > "+started+"; echo $LOCKRUN_FENCING_TOKEN > "+tokFile)
	<-renewed
	proxy.Hold(netproxy.Both)
	for alive(pid) {
		time.Sleep(time.Millisecond)
	}
	dead := time.Now()
	if code := exitCode(t, cmd); code != 76 {
		t.Errorf("cut-off lockrun exit %d, want 76", code)
	}
	if code := exitCode(t, waiter); code != 0 {
		t.Fatalf("waiter exit %d, want 0", code)
	}
	ns, _ := strconv.ParseInt(waitFile(t, started), 10, 64)
	if at := time.Unix(0, ns); !at.After(dead) {
		t.Errorf("the waiter's command started %v before the cut-off holder's command was dead", dead.Sub(at))
	} else {
		t.Logf("waiter's command started %v after the cut-off command died", at.Sub(dead).Round(time.Millisecond))
	}
	if next, _ := strconv.ParseUint(waitFile(t, tokFile), 10, 64); next <= tok {
		t.Errorf("waiter's token %d is not above %d", next, tok)
	}
}
