package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/serverproc"
	"github.com/lockrun/lockrun/internal/testcert"
)

// Server is a private PostgreSQL on a free loopback port, with trust
// authentication for user postgres, killed when the test ends.
type Server struct {
	t    testing.TB
	dir  string // 0755, so that the postgres user can reach data/
	bin  string
	port int
	cred *syscall.Credential // the postgres user when running as root
	proc *serverproc.Proc    // nil while stopped
	set  []string            // extra settings, "name=value"
}

// Start initialises a database cluster in a temporary folder and starts a
// server on it (about 2 s). As root, the server runs as the postgres user,
// since initdb and postgres refuse to run as root.
func Start(t testing.TB) *Server { return StartWith(t) }

// StartWith is Start with extra server settings, each "name=value" as
// `postgres -c` takes it, e.g. "shared_preload_libraries=pg_stat_statements".
func StartWith(t testing.TB, settings ...string) *Server {
	t.Helper()
	return start(t, func(*Server) []string { return settings })
}

// StartTLS is Start with TLS on: the server presents f's certificate
// (for 127.0.0.1, signed by f's CA) and still takes plaintext sessions.
func StartTLS(t testing.TB, f testcert.Files) *Server {
	t.Helper()
	return start(t, func(s *Server) []string {
		cert, key := s.path("server.pem"), s.path("server.key")
		s.install(f.Cert, cert, 0o644)
		s.install(f.Key, key, 0o600) // postgres refuses a key others may read
		return []string{"ssl=on", "ssl_cert_file=" + cert, "ssl_key_file=" + key}
	})
}

// start initialises a cluster and starts a server with the settings that
// setup returns once the folder is made.
func start(t testing.TB, setup func(*Server) []string) *Server {
	t.Helper()
	bin, err := binDir()
	backendtest.NeedServer(t, "PostgreSQL", err)
	s := &Server{t: t, bin: bin}
	if s.dir, err = os.MkdirTemp("", "pgtest-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(); os.RemoveAll(s.dir) })
	if err := os.Chmod(s.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := s.path("data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		s.cred = postgresUser(t, data)
	}
	initdb := s.command(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "--locale=C", "-E", "UTF8")
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	s.set = setup(s)
	backendtest.OnFreePorts(t, 1, func(ports []int) error {
		s.port = ports[0]
		return s.tryStart()
	})
	return s
}

// URL is the server's postgres:// URL.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Addr())
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Freeze stops the server and all its sessions with SIGSTOP: connections
// stay open and nothing answers, like a hung machine.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

// Stop shuts the server down (fast shutdown, SIGINT: sessions are cut) and
// waits for it, killing it after 10 s; it does nothing when the server is
// not running.
func (s *Server) Stop() {
	if s.proc == nil {
		return
	}
	s.proc.Stop(syscall.SIGINT, 10*time.Second)
	s.proc = nil
}

// Restart stops the server and starts it again on the same port and data.
func (s *Server) Restart() {
	s.Stop()
	s.start()
}

func (s *Server) path(name string) string { return filepath.Join(s.dir, name) }

// install copies the file src to dst with mode perm, owned by the user
// the server runs as.
func (s *Server) install(src, dst string, perm os.FileMode) {
	s.t.Helper()
	b, err := os.ReadFile(src)
	if err == nil {
		err = os.WriteFile(dst, b, perm)
	}
	if err == nil && s.cred != nil {
		err = os.Chown(dst, int(s.cred.Uid), int(s.cred.Gid))
	}
	if err != nil {
		s.t.Fatalf("pgtest: %v", err)
	}
}

// start runs postgres and waits until it accepts connections.
func (s *Server) start() {
	s.t.Helper()
	if err := s.tryStart(); err != nil {
		s.t.Fatal(err)
	}
}

// tryStart starts postgres on s.port and waits until it accepts a
// connection; on failure nothing is left running.
func (s *Server) tryStart() error {
	log, err := os.OpenFile(s.path("log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	args := []string{"-D", s.path("data"), "-p", strconv.Itoa(s.port),
		"-k", s.path("data"), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "max_connections=1100"}
	for _, set := range s.set {
		args = append(args, "-c", set)
	}
	cmd := s.command(filepath.Join(s.bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = log, log
	proc, err := serverproc.Start(cmd)
	if err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	err = proc.Ready(15*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, s.URL())
		if err == nil {
			c.Close(ctx)
		}
		return err
	})
	if err != nil {
		proc.Kill()
		log, _ := os.ReadFile(s.path("log"))
		return fmt.Errorf("pgtest: postgres on port %d did not start: %v\n%s", s.port, err, log)
	}
	s.proc = proc
	return nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	return cmd
}

// signal sends sig to the postmaster and every process it started: each
// session runs in a process of its own, in a session of its own.
func (s *Server) signal(sig syscall.Signal) {
	if s.proc != nil {
		_ = s.proc.Signal(sig)
	}
}

// postgresUser returns the credentials of the postgres user and gives it
// the data folder.
func postgresUser(t testing.TB, data string) *syscall.Credential {
	t.Helper()
	u, err := user.Lookup("postgres")
	backendtest.NeedServer(t, "PostgreSQL's postgres user (running as root)", err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(data, uid, gid); err != nil {
		t.Fatal(err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// binDir finds the newest PostgreSQL server binaries that Debian installs.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	return "", fmt.Errorf("pgtest: no PostgreSQL server binaries in /usr/lib/postgresql/*/bin: run .ci/services.sh")
}
