// Package etcdtest runs private etcd servers for tests: Debian's etcd
// binary on free loopback ports with its data in a temporary directory,
// one process per member that a test can stop, freeze (SIGSTOP), thaw and
// restart with its data intact; one member, or a cluster of several. The
// servers are killed when the test ends.
//
// It uses the etcd binary that .ci/services.sh installs rather than an
// embedded server: a real separate process is what fault tests need to
// freeze and kill, and the module's server would pull hundreds of packages
// into the build. A missing binary fails the test; it never skips.
package etcdtest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/serverproc"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Binary is the etcd server that tests run.
const Binary = "/usr/bin/etcd"

// startTimeout bounds how long a start may take before the test fails.
const startTimeout = 15 * time.Second

// Server is one running etcd member: a single-member cluster (Start,
// StartTLS) or one of several (StartCluster).
type Server struct {
	t       testing.TB
	dir     string
	name    string
	cluster string // --initial-cluster: every member's name=peer URL
	client  int    // client port
	peer    int    // peer port
	certs   *Certs // nil for plain connections

	mu   sync.Mutex       // guards proc: the fault harness freezes from its own goroutines
	proc *serverproc.Proc // nil while stopped
}

// Certs names PEM files for a TLS server: its certificate and key, which
// clients present too, and the CA that signed it (the certificate itself
// when self-signed). The certificate must be valid for 127.0.0.1.
type Certs struct{ CA, Cert, Key string }

// Start starts a server and waits until it serves requests.
func Start(t testing.TB) *Server { return start(t, nil) }

// StartTLS starts a server that speaks TLS only and requires clients to
// present a certificate signed by c.CA.
func StartTLS(t testing.TB, c Certs) *Server { return start(t, &c) }

func start(t testing.TB, c *Certs) *Server { return startCluster(t, 1, c)[0] }

// StartCluster starts an n-member cluster and waits until every member
// serves requests. Its members can be stopped and frozen one by one, to
// leave a member without a leader.
func StartCluster(t testing.TB, n int) []*Server { return startCluster(t, n, nil) }

func startCluster(t testing.TB, n int, c *Certs) []*Server {
	t.Helper()
	var members []*Server
	backendtest.OnFreePorts(t, 2*n, func(ports []int) (err error) {
		members, err = startMembers(t, c, ports)
		return err
	})
	return members
}

// startMembers starts a cluster of one member per two ports (client,
// peer); on failure none is left running.
func startMembers(t testing.TB, c *Certs, ports []int) ([]*Server, error) {
	t.Helper()
	members := make([]*Server, len(ports)/2)
	var cluster []string
	for i := range members {
		members[i] = newServer(t, "m"+strconv.Itoa(i), c, ports[2*i:2*i+2])
		cluster = append(cluster, members[i].name+"="+members[i].peerURL())
	}
	for _, m := range members {
		m.cluster = strings.Join(cluster, ",")
		m.spawn() // together: no member can answer before a majority runs
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

func newServer(t testing.TB, name string, c *Certs, ports []int) *Server {
	t.Helper()
	_, err := os.Stat(Binary)
	backendtest.NeedServer(t, "etcd", err)
	s := &Server{t: t, dir: t.TempDir(), name: name, client: ports[0], peer: ports[1], certs: c}
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) peerURL() string { return "http://127.0.0.1:" + strconv.Itoa(s.peer) }

// Addr is the client address, host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.client) }

// URL is the lockrun backend URL of the server, with the TLS files as
// query parameters for a TLS server.
func (s *Server) URL() string {
	if s.certs == nil {
		return "etcd://" + s.Addr()
	}
	q := url.Values{"cacert": {s.certs.CA}, "cert": {s.certs.Cert}, "key": {s.certs.Key}}
	return "etcds://" + s.Addr() + "?" + q.Encode()
}

// PID is the server's process id.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.PID()
}

// Stop kills the server (SIGKILL, a crash: etcd's log is fsynced, so no
// acknowledged write is lost) and waits for it to exit. Stopping a
// stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	s.proc.Kill()
	s.proc = nil
}

// Freeze stops the server with SIGSTOP: connections stay open, nothing is
// answered, no lease expires until Thaw.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

// Restart stops the server and starts it again on the same ports with the
// same data.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.launch()
}

// Wipe stops the server, deletes its data and starts it again on the same
// ports: a new cluster, whose revisions start again from 1, as after a
// lost disk. Only for a single-member cluster.
func (s *Server) Wipe() {
	s.t.Helper()
	s.Stop()
	if err := os.RemoveAll(filepath.Join(s.dir, "data")); err != nil {
		s.t.Fatal(err)
	}
	s.launch()
}

// Received is how many messages the server received from clients, unary
// calls and stream messages (keep-alives, watch requests) alike, from its
// metrics.
func (s *Server) Received(t testing.TB) int64 {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatalf("reading etcd metrics: %v", err)
	}
	defer resp.Body.Close()
	var n float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "grpc_server_msg_received_total{") {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			n += v
		}
	}
	return int64(n)
}

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := s.newClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newClient connects to the server. gRPC would wait a second before
// redialing a port that refused it while etcd started: redial faster.
func (s *Server) newClient() (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: []string{s.Addr()}, DialTimeout: time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.2, MaxDelay: 50 * time.Millisecond},
		})}}
	if s.certs != nil {
		info := transport.TLSInfo{CertFile: s.certs.Cert, KeyFile: s.certs.Key, TrustedCAFile: s.certs.CA}
		tc, err := info.ClientConfig()
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	return clientv3.New(cfg)
}

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		s.t.Fatalf("etcd is not running; cannot send %v", sig)
	}
	if err := s.proc.Signal(sig); err != nil {
		s.t.Fatalf("signal %v to etcd: %v", sig, err)
	}
}

// launch starts the process and waits until it answers a read.
func (s *Server) launch() {
	s.t.Helper()
	s.spawn()
	s.WaitReady()
}

// spawn starts the process. Short raft ticks make a one-member cluster
// elect itself in a few tens of milliseconds, and lower etcd's minimum
// lease TTL to one second; members of a larger cluster, which must also
// hear each other on a loaded machine, tick at twice that.
func (s *Server) spawn() {
	s.t.Helper()
	clientURL := "http://" + s.Addr()
	var tlsArgs []string
	if c := s.certs; c != nil {
		clientURL = "https://" + s.Addr()
		tlsArgs = []string{"--cert-file", c.Cert, "--key-file", c.Key, "--trusted-ca-file", c.CA, "--client-cert-auth"}
	}
	heartbeat, election := "10", "50"
	if strings.Contains(s.cluster, ",") {
		heartbeat, election = "20", "100"
	}
	cmd := exec.Command(Binary, append(tlsArgs,
		"--name", s.name, "--data-dir", filepath.Join(s.dir, "data"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", s.peerURL(), "--initial-advertise-peer-urls", s.peerURL(),
		"--initial-cluster", s.cluster,
		"--heartbeat-interval", heartbeat, "--election-timeout", election,
		"--logger", "zap", "--log-outputs", filepath.Join(s.dir, "etcd.log"))...)
	proc, err := serverproc.Start(cmd)
	if err != nil {
		s.t.Fatalf("starting etcd: %v", err)
	}
	s.mu.Lock()
	s.proc = proc
	s.mu.Unlock()
}

// WaitReady waits until the member answers a linearizable read: it runs,
// and it has a leader.
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
	if err := s.ready(proc); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "etcd.log"))
		return fmt.Errorf("etcd on %s did not start: %v\n%s", s.Addr(), err, tail(log, 2000))
	}
	return nil
}

// ready polls a read until it succeeds, the process exits or time is up.
func (s *Server) ready(proc *serverproc.Proc) error {
	c, err := s.newClient()
	if err != nil {
		return err
	}
	defer c.Close()
	return proc.Ready(startTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err := c.Get(ctx, "ready")
		return err
	})
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
