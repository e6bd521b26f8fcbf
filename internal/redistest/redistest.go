// Package redistest runs a private redis-server for tests: on a free
// loopback port, in a temporary directory, persisting nothing, so that a
// test can stop, freeze, thaw and restart it without touching anyone
// else's data. The server is killed when the test ends. A missing
// redis-server fails the test: it is never skipped.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/serverproc"
)

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// Server is one redis-server process.
type Server struct {
	t     testing.TB
	port  int
	dir   string
	extra []string
	proc  *serverproc.Proc // nil while stopped
}

// Start starts a server with the given extra arguments (e.g. "--requirepass",
// "secret") on a free loopback port.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	_, err := exec.LookPath("redis-server")
	backendtest.NeedServer(t, "redis-server", err)
	s := &Server{t: t, dir: t.TempDir(), extra: extra}
	backendtest.OnFreePorts(t, 1, func(ports []int) error {
		s.port = ports[0]
		return s.start()
	})
	t.Cleanup(s.kill)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL is redis://Addr/0 with the restart wait turned off: a server that
// has just started would otherwise grant no lock for a TTL (see the
// backend's restart_wait). Tests of that wait build their own URL.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0?" + NoRestartWait }

// NoRestartWait is the query parameter that turns the restart wait off.
const NoRestartWait = "restart_wait=0"

// Dir is the server's working directory; its log is Dir()/redis.log.
func (s *Server) Dir() string { return s.dir }

func (s *Server) start() error {
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"),
	}, s.extra...)
	proc, err := serverproc.Start(exec.Command("redis-server", args...))
	if err != nil {
		return err
	}
	if err := proc.Ready(startTimeout, s.ping); err != nil {
		proc.Kill()
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		return fmt.Errorf("redis-server on port %d: %v\n%s", s.port, err, log)
	}
	s.proc = proc
	return nil
}

// ping sends PING without a client library and expects +PONG. A server
// started with a password answers -NOAUTH, which also means it is up.
func (s *Server) ping() error {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" && (len(line) < 7 || line[:7] != "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Stop kills the server, frozen or not; nothing is persisted, so its data
// is gone.
func (s *Server) Stop() {
	s.t.Helper()
	s.kill()
}

func (s *Server) kill() {
	if s.proc == nil {
		return
	}
	s.proc.Kill()
	s.proc = nil
}

// Restart stops the server and starts an empty one on the same port.
func (s *Server) Restart() {
	s.t.Helper()
	s.kill()
	if err := s.start(); err != nil {
		s.t.Fatalf("restarting redis-server: %v", err)
	}
}

// Freeze stops the server with SIGSTOP: connections stay open, requests go
// unanswered, keys do not expire until Thaw.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server with SIGCONT.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.proc == nil {
		s.t.Fatalf("redis-server is not running")
	}
	if err := s.proc.Signal(sig); err != nil {
		s.t.Fatalf("signalling redis-server: %v", err)
	}
}
