package etcd

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

func TestRenewOfADeletedEntryIsLost(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("a", false))
	// Someone cleans up by hand: the lease lives on, the entry does not.
	if _, err := srv.Client(t).Delete(t.Context(), l.(*lease).e.name); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Renew after the entry was deleted = %v, want ErrLost", err)
	}
	if err := l.Release(t.Context()); !errors.Is(err, backend.ErrLost) {
		t.Errorf("Release after the entry was deleted = %v, want ErrLost", err)
	}
}

func TestRenewAgainstAFrozenServerEndsByItsDeadline(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("a", false))
	srv.Freeze()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	begin := time.Now()
	err := l.Renew(ctx)
	took := time.Since(begin)
	srv.Thaw()
	if !errors.Is(err, backend.ErrUnavailable) || took > 400*time.Millisecond {
		t.Errorf("Renew against a frozen etcd = %v after %v; want ErrUnavailable by the 300ms deadline", err, took)
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Errorf("Renew once etcd runs again: %v", err)
	}
	l.Release(t.Context())
}

func TestLeaseSurvivesARestart(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	o := opts("a", false)
	o.TTL = 3 * time.Second
	l := backendtest.MustAcquire(t, b, key, o)
	srv.Restart()
	// The client redials within its short reconnect backoff, well inside
	// the lease; etcd keeps leases across restarts.
	deadline := time.Now().Add(2 * time.Second)
	var err error
	for err = l.Renew(t.Context()); err != nil && time.Now().Before(deadline); err = l.Renew(t.Context()) {
		if !errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Renew after a restart = %v, want success or ErrUnavailable", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("no renewal succeeded within 2s of the restart: %v", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestOpenFailsFastWhenNothingListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	u, _ := url.Parse("etcd://" + addr + ",localhost:" + strings.Split(addr, ":")[1])
	begin := time.Now()
	_, err = OpenURL(t.Context(), u)
	// Three tries, 0.2 s then 0.4 s apart; each is refused at once.
	if !errors.Is(err, backend.ErrUnavailable) || time.Since(begin) > 1500*time.Millisecond {
		t.Errorf("OpenURL with every endpoint refusing = %v after %v; want ErrUnavailable after the probe's ~0.6s", err, time.Since(begin))
	}
}

// TestExcludesEtcdctlLock checks that lockrun's layout is etcd's mutex
// layout: `etcdctl lock /lockrun/KEY` and lockrun exclude each other, and
// the token is what etcdctl calls ETCD_LOCK_REV.
func TestExcludesEtcdctlLock(t *testing.T) {
	srv := etcdtest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	cmd := exec.Command("etcdctl", "--endpoints", srv.Addr(), "lock", DefaultPrefix+key, "--", "sh", "-c", "echo $ETCD_LOCK_REV; sleep 30")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("etcdctl: %v (run .ci/services.sh)", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line := make([]byte, 32)
	n, _ := out.Read(line)
	rev := strings.TrimSpace(string(line[:n]))
	_, err = b.Acquire(t.Context(), key, opts("a", false))
	var held *backend.HeldError
	if !errors.As(err, &held) || held.Status.Token.String() != rev {
		t.Fatalf("Acquire while etcdctl holds the lock = %v; want held with token ETCD_LOCK_REV=%s", err, rev)
	}
	if err := b.ForceRelease(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	l := backendtest.MustAcquire(t, b, key, opts("a", true))
	l.Release(t.Context())
}

func TestOpenSkipsADeadEndpoint(t *testing.T) {
	srv := etcdtest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	b, key := openTest(t, "etcd://"+dead+","+srv.Addr()), backendtest.Key(t)
	for range 4 { // round robin would send some of these to the dead one
		roundTrip(t, b, key)
	}
}

func TestAuth(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client(t)
	for _, step := range []func() error{
		func() error { _, err := c.RoleAdd(t.Context(), "root"); return err },
		func() error { _, err := c.UserAdd(t.Context(), "root", "s3cret"); return err },
		func() error { _, err := c.UserGrantRole(t.Context(), "root", "root"); return err },
		func() error { _, err := c.RoleAdd(t.Context(), "elsewhere"); return err },
		func() error {
			_, err := c.RoleGrantPermission(t.Context(), "elsewhere", "/other/", "/other0", clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := c.UserAdd(t.Context(), "bob", "pw"); return err },
		func() error { _, err := c.UserGrantRole(t.Context(), "bob", "elsewhere"); return err },
		func() error { _, err := c.RoleAdd(t.Context(), "reader"); return err },
		func() error {
			_, err := c.RoleGrantPermission(t.Context(), "reader", "/lockrun/", "/lockrun0", clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := c.UserAdd(t.Context(), "alice", "pw"); return err },
		func() error { _, err := c.UserGrantRole(t.Context(), "alice", "reader"); return err },
		func() error { _, err := c.AuthEnable(t.Context()); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	b := openTest(t, "etcd://root:s3cret@"+srv.Addr())
	roundTrip(t, b, backendtest.Key(t))

	// The client authenticates every stream it opens: renewals share one
	// keep-alive stream, so the password is checked once, not per heartbeat.
	l := backendtest.MustAcquire(t, b, backendtest.Key(t), opts("a", false))
	before := authentications(t, srv.Addr())
	if before == 0 {
		t.Fatal("etcd's metrics count no Authenticate request, though the client logged in")
	}
	for range 5 {
		if err := l.Renew(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := authentications(t, srv.Addr()) - before; n > 1 {
		t.Errorf("5 renewals authenticated %d times; want at most 1", n)
	}

	u, _ := url.Parse("etcd://root:wrong-pw@" + srv.Addr())
	_, err := OpenURL(t.Context(), u)
	if !errors.Is(err, backend.ErrPermission) || errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "authentication failed") || strings.Contains(err.Error(), "wrong-pw") {
		t.Errorf("OpenURL with a wrong password = %v; want ErrPermission saying authentication failed, without the password", err)
	}

	// A user whose role grants keys elsewhere is refused at once; one that
	// may only read the prefix is refused the lock: permission errors, not
	// outages.
	u, _ = url.Parse("etcd://bob:pw@" + srv.Addr())
	if _, err := OpenURL(t.Context(), u); !errors.Is(err, backend.ErrPermission) || errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("OpenURL by a user without access to the prefix = %v; want ErrPermission", err)
	}
	alice := openTest(t, "etcd://alice:pw@"+srv.Addr())
	if _, err := alice.Acquire(t.Context(), backendtest.Key(t), opts("a", false)); !errors.Is(err, backend.ErrPermission) || errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Acquire by a user who may only read the prefix = %v; want ErrPermission", err)
	}
}

// authentications is how many Authenticate requests etcd has handled, from
// its metrics.
func authentications(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "grpc_server_handled_total{") && strings.Contains(line, `grpc_method="Authenticate"`) {
			v, err := strconv.ParseFloat(strings.TrimSpace(line[strings.LastIndexByte(line, ' ')+1:]), 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			n += int(v)
		}
	}
	return n
}
