// Package zktest runs private ZooKeeper servers for tests: Debian's
// zookeeper package on free loopback ports with its data in a temporary
// directory, one JVM per member that a test can stop, freeze (SIGSTOP),
// thaw, restart with its data, or wipe; one standalone server, or an
// ensemble of several. The servers are killed when the test ends. A
// missing package fails the test; it never skips.
package zktest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/serverproc"
)

// Jar is Debian's ZooKeeper server; its manifest names the jars it needs,
// but for those of Netty's TLS path, which classpath adds.
const Jar = "/usr/share/java/zookeeper.jar"

const classpath = Jar + ":/usr/share/java/netty-codec.jar:/usr/share/java/netty-resolver.jar:/usr/share/java/netty-transport-native-unix-common.jar"

// TickTime is the servers' tickTime: sessions may be as short as two
// ticks, and the tests' URLs tell lockrun the tick (tick_time).
const TickTime = 250 * time.Millisecond

// startTimeout bounds how long a start may take before the test fails.
const startTimeout = 30 * time.Second

// Server is one running ZooKeeper: standalone (Start) or a member of an
// ensemble (StartEnsemble).
type Server struct {
	t       testing.TB
	dir     string
	id      int
	client  int         // client port
	members []string    // server.N lines of the ensemble; none when standalone
	tls     []string    // zoo.cfg lines of a TLS-only server; none for plain
	tlsCfg  *tls.Config // how Mode reaches a TLS-only server

	mu   sync.Mutex       // guards proc: fault tests freeze from their own goroutines
	proc *serverproc.Proc // nil while stopped
}

// Start starts a standalone server and waits until it serves.
func Start(t testing.TB) *Server { return StartEnsemble(t, 1)[0] }

// StartEnsemble starts n members (one: a standalone server) and waits until
// every one serves, that is, the ensemble has a leader.
func StartEnsemble(t testing.TB, n int) []*Server {
	t.Helper()
	if _, err := os.Stat(Jar); err != nil {
		t.Fatalf("ZooKeeper not installed (%v): run .ci/services.sh (apt-get install zookeeper)", err)
	}
	var members []*Server
	backendtest.OnFreePorts(t, 3*n, func(ports []int) (err error) {
		members, err = startMembers(t, ports)
		return err
	})
	return members
}

// startMembers starts one member per three ports (client, peer,
// election); on failure none is left running.
func startMembers(t testing.TB, ports []int) ([]*Server, error) {
	t.Helper()
	members := make([]*Server, len(ports)/3)
	var lines []string
	for i := range members {
		lines = append(lines, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", i+1, ports[3*i+1], ports[3*i+2]))
	}
	if len(members) == 1 {
		lines = nil
	}
	for i := range members {
		s := &Server{t: t, dir: t.TempDir(), id: i + 1, client: ports[3*i], members: lines}
		t.Cleanup(s.Stop)
		if err := s.configure(); err != nil {
			return nil, err
		}
		members[i] = s
	}
	for _, m := range members {
		if err := m.spawn(); err != nil {
			return nil, err
		}
	}
	for _, m := range members {
		if err := m.awaitReady(); err != nil {
			for _, m := range members {
				m.Stop()
			}
			return nil, err
		}
	}
	return members, nil
}

// configure writes zoo.cfg and, in an ensemble, the myid file.
func (s *Server) configure() error {
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	cfg := []string{
		"tickTime=" + strconv.Itoa(int(TickTime/time.Millisecond)),
		"initLimit=40", "syncLimit=8", // generous: the machine is loaded
		"dataDir=" + data,
	}
	if s.tls == nil {
		cfg = append(cfg, "clientPort="+strconv.Itoa(s.client), "clientPortAddress=127.0.0.1")
	}
	cfg = append(cfg,
		"maxSessionTimeout=120000",
		"maxClientCnxns=0",         // no limit per address (60 by default): every client here is on 127.0.0.1
		"admin.enableServer=false", // else it binds :8080
		"4lw.commands.whitelist=srvr,ruok,cons",
		"forceSync=no", // tests kill servers; no test needs a write to outlive that
		"electionPortBindRetry=3",
	)
	cfg = append(cfg, s.members...)
	cfg = append(cfg, s.tls...)
	if len(s.members) > 0 {
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(s.id)+"\n"), 0o600); err != nil {
			return err
		}
	}
	return os.WriteFile(s.cfgPath(), []byte(strings.Join(cfg, "\n")+"\n"), 0o600)
}

func (s *Server) cfgPath() string { return filepath.Join(s.dir, "zoo.cfg") }

// spawn starts the JVM. Its options make it start in about 0.3 s and keep
// its heap small; its log goes to DIR/zk.log.
func (s *Server) spawn() error {
	log, err := os.Create(filepath.Join(s.dir, "zk.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command("java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m",
		"-Djava.net.preferIPv4Stack=true",
		// A member that looked for a leader while the others were frozen
		// backs off its election notifications up to a minute by default;
		// a second keeps the ensemble's recovery within the tests' time.
		"-Dzookeeper.fastleader.maxNotificationInterval=1000",
		"-cp", classpath,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", s.cfgPath())
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.dir, log, log
	proc, err := serverproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("starting ZooKeeper: %w", err)
	}
	s.mu.Lock()
	s.proc = proc
	s.mu.Unlock()
	return nil
}

// Addr is the client address, host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.client) }

// URL is the lockrun backend URL of this server alone, with its tick.
func (s *Server) URL() string { return URL(s.Addr()) }

// URL is the lockrun backend URL of the given server addresses (servers or
// proxies in front of them), with the test servers' tick.
func URL(addrs ...string) string {
	return "zk://" + strings.Join(addrs, ",") + "/lockrun?tick_time=" + TickTime.String()
}

// PID is the server's process id.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.PID()
}

// Stop kills the server (SIGKILL: a crash) and waits for it to exit.
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.Kill()
		s.proc = nil
	}
}

// Freeze stops the server with SIGSTOP: connections stay open, nothing is
// answered, no session expires on it until Thaw.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

// Restart stops the server and starts it again on the same ports with the
// same data; it returns once the server serves.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	if err := s.spawn(); err != nil {
		s.t.Fatal(err)
	}
	s.WaitReady()
}

// Wipe stops a standalone server, deletes its data and starts it again
// empty.
func (s *Server) Wipe() {
	s.t.Helper()
	s.Stop()
	if err := os.RemoveAll(filepath.Join(s.dir, "data")); err != nil {
		s.t.Fatal(err)
	}
	if err := s.configure(); err != nil {
		s.t.Fatal(err)
	}
	if err := s.spawn(); err != nil {
		s.t.Fatal(err)
	}
	s.WaitReady()
}

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		s.t.Fatalf("ZooKeeper is not running; cannot send %v", sig)
	}
	if err := s.proc.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to ZooKeeper: %v", sig, err)
	}
}

// WaitReady waits until the server serves clients (in an ensemble: it
// follows or leads).
func (s *Server) WaitReady() {
	s.t.Helper()
	if err := s.awaitReady(); err != nil {
		s.t.Fatal(err)
	}
}

func (s *Server) awaitReady() error {
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	err := proc.Ready(startTimeout, func() error {
		_, err := s.Mode()
		return err
	})
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "zk.log"))
		return fmt.Errorf("ZooKeeper on %s did not start: %v\n%s", s.Addr(), err, tail(log, 2000))
	}
	return nil
}

// Mode asks the server (4lw srvr) whether it is standalone, leader or
// follower; it fails while the server does not serve.
func (s *Server) Mode() (string, error) {
	var c net.Conn
	var err error
	if s.tlsCfg != nil {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: 200 * time.Millisecond}, "tcp", s.Addr(), s.tlsCfg)
	} else {
		c, err = net.DialTimeout("tcp", s.Addr(), 200*time.Millisecond)
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	for sc := bufio.NewScanner(c); sc.Scan(); {
		if mode, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return mode, nil
		}
	}
	return "", errors.New("not serving")
}

// Leader returns the member that leads, waiting up to timeout for one.
func Leader(t testing.TB, members []*Server, timeout time.Duration) *Server {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, m := range members {
			if mode, err := m.Mode(); err == nil && mode == "leader" {
				return m
			}
		}
	}
	t.Fatalf("no ZooKeeper leader within %v", timeout)
	return nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// KazooLock is the argv prefix that runs a command under a kazoo Lock on
// path of the servers at hosts (host:port,...): Debian's python3-kazoo, a
// ZooKeeper lock as a Python user would take it. Append
// [TIMEOUT] "--" COMMAND....
func KazooLock(t testing.TB, hosts, path string) []string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(self), "zklock.py")
	if err := exec.Command("/usr/bin/python3", "-c", "import kazoo").Run(); err != nil {
		t.Fatalf("python3-kazoo not installed (%v): run .ci/services.sh (apt-get install python3-kazoo)", err)
	}
	return []string{"/usr/bin/python3", script, hosts, path}
}

// WaitQuorum waits up to a minute until every one of members serves a sync
// (which goes through the leader) on a new session, twice a quarter of a
// second apart: a leader that was frozen may win, then give up, an
// election after it thaws.
func WaitQuorum(t testing.TB, members ...*Server) {
	t.Helper()
	deadline := time.Now().Add(2 * startTimeout)
	for _, m := range members {
		for ok := 0; ok < 2; time.Sleep(TickTime) {
			if err := m.syncOnce(); err != nil {
				ok = 0
				if time.Now().After(deadline) {
					t.Fatalf("ZooKeeper on %s does not serve: %v", m.Addr(), err)
				}
				continue
			}
			ok++
		}
	}
}

// syncOnce opens a session on the server alone and syncs the root.
func (s *Server) syncOnce() error {
	c, ev, err := zk.Connect([]string{s.Addr()}, 2*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		return err
	}
	defer c.Close()
	timeout := time.After(time.Second)
	for {
		select {
		case e := <-ev:
			if e.State != zk.StateHasSession {
				continue
			}
			done := make(chan error, 1)
			go func() { _, err := c.Sync("/"); done <- err }()
			select {
			case err := <-done:
				return err
			case <-timeout:
				return errors.New("sync unanswered")
			}
		case <-timeout:
			return errors.New("no session")
		}
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
