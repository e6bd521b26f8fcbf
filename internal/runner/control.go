package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/randtext"
)

// EnvControl names the unix socket on which a command asks its own lockrun
// for its checkpoint and whether its token is still the holder's. The
// socket is abstract ("@lockrun-..."): it leaves nothing in the file
// system, not even when lockrun is SIGKILLed, and only this user (and
// root) is answered, by the peer's credentials; the command needs no
// credentials of the backend.
const EnvControl = "LOCKRUN_CONTROL"

// Control requests and their answers: one JSON line each way per
// connection.
const (
	OpCheckpointSet = "checkpoint-set"
	OpCheckpointGet = "checkpoint-get"
	OpFenceCheck    = "fence-check"
)

// Answer statuses.
const (
	StatusOK    = "ok"
	StatusNone  = "none"  // no checkpoint stored
	StatusLost  = "lost"  // the token is no longer the holder's: refused
	StatusError = "error" // see Message and Kind
)

// Kinds of StatusError, which the CLI maps to its exit statuses.
const (
	KindUsage       = "usage"       // a bad request: too large, unknown, no checkpoints here
	KindPermission  = "permission"  // backend.ErrPermission
	KindConfig      = "config"      // backend.ErrConfig
	KindUnavailable = "unavailable" // backend.ErrUnavailable
	KindInternal    = "internal"    // anything else
)

// ControlRequest is what a command's lockrun sends.
type ControlRequest struct {
	Op    string `json:"op"`
	Value []byte `json:"value,omitempty"`
}

// ControlAnswer is what the holding lockrun replies.
type ControlAnswer struct {
	Status  string `json:"status"`
	Value   []byte `json:"value,omitempty"`
	Token   string `json:"token,omitempty"` // of the holder that wrote the checkpoint
	Message string `json:"message,omitempty"`
	Kind    string `json:"kind,omitempty"` // for StatusError
}

// controlTimeout bounds one request, backend call included.
const controlTimeout = 10 * time.Second

// maxRequest bounds a request line: a checkpoint in base64 and some JSON.
const maxRequest = backend.MaxCheckpoint*4/3 + 1024

// inspector is the part of a backend the fence check needs; every backend
// has it. Checkpoints need a backend.Checkpointer as well.
type inspector interface {
	Inspect(ctx context.Context, key string) (backend.Status, error)
}

// Ask sends one request to the lockrun listening at path.
func Ask(ctx context.Context, path string, req ControlRequest) (ControlAnswer, error) {
	var ans ControlAnswer
	ctx, cancel := context.WithTimeout(ctx, controlTimeout+time.Second)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "unix", path)
	if err != nil {
		return ans, fmt.Errorf("%s=%s: %w", EnvControl, path, err)
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return ans, fmt.Errorf("%s=%s: %w", EnvControl, path, err)
	}
	if err := json.NewDecoder(io.LimitReader(conn, maxRequest)).Decode(&ans); err != nil {
		return ans, fmt.Errorf("%s=%s: no answer: %w", EnvControl, path, err)
	}
	return ans, nil
}

// control is the holder's end: it answers for one lease while the command
// runs, and refuses everything once the lease is lost.
type control struct {
	key   string
	token backend.Token
	limit int // the run's --limit: above 1, a semaphore, which keeps no checkpoints
	store inspector
	ln    net.Listener
	log   *slog.Logger

	ctx     context.Context // cancelled by close: requests in flight end
	cancel  context.CancelFunc
	mu      sync.Mutex    // one backend call, and one answer's delivery, at a time
	stopped bool          // under mu: stop has begun; nothing more is answered
	lost    chan struct{} // closed when the lease is lost, or by close
	once    sync.Once
	wg      sync.WaitGroup
}

// wrappedLocker is a Locker in front of a backend (the CLI's wait
// announcer): the command's requests go to the backend behind it, whose
// Inspect and checkpoints the wrapper does not have.
type wrappedLocker interface {
	Unwrap() backend.Backend
}

// startControl listens for the command's requests on lease, when the
// backend can answer them; see newControl.
func startControl(job Job, lease backend.Lease, log *slog.Logger) *control {
	c := newControl(job, log)
	c.serve(lease, log)
	return c
}

// newControl readies the socket on which the command asks for its
// checkpoints and fence checks, when the backend can answer them
// (job.Locker, or the backend it wraps, is an inspector); it answers
// nothing until serve binds it to a lease, and connections wait in its
// queue until then. A waiter readies it while it waits, so that none of
// it delays the command once the lock comes. It returns nil when it
// cannot: the command then runs without EnvControl, and its requests fail.
func newControl(job Job, log *slog.Logger) *control {
	var locker any = job.Locker
	if w, ok := locker.(wrappedLocker); ok {
		locker = w.Unwrap()
	}
	store, ok := locker.(inspector)
	if !ok {
		return nil
	}
	name, err := randtext.Text()
	var ln net.Listener
	if err == nil {
		ln, err = net.Listen("unix", "@lockrun-"+name)
	}
	if err != nil {
		log.Warn("no control socket for the command: checkpoints and fence checks will fail", "err", err)
		return nil
	}
	c := &control{key: job.Key, limit: job.Acquire.EffectiveLimit(), store: store, ln: ln, log: log, lost: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// serve answers for lease from now on, logging to log.
func (c *control) serve(lease backend.Lease, log *slog.Logger) {
	if c == nil {
		return
	}
	c.token, c.log = lease.Token(), log
	c.wg.Go(c.accept)
}

// vars adds EnvControl to the command's variables.
func (c *control) vars(env map[string]string) map[string]string {
	if c != nil {
		env[EnvControl] = c.ln.Addr().String()
	}
	return env
}

// watch refuses every request from the moment lost is closed.
func (c *control) watch(lost <-chan struct{}) {
	if c == nil {
		return
	}
	go func() {
		select {
		case <-lost:
			c.once.Do(func() { close(c.lost) })
		case <-c.ctx.Done():
		}
	}()
}

// stop stops answering and ends the requests in flight: nothing is
// written for this lease once the command is gone and the lock is about
// to be released, and no fence check says it is held. Every answer from
// then on is a refusal; stop waits for the one being made or delivered
// (both hold mu), not for the socket's goroutines to be woken, which
// close does.
func (c *control) stop() {
	if c == nil {
		return
	}
	c.once.Do(func() { close(c.lost) })
	c.cancel()
	c.ln.Close()
	c.mu.Lock() // the answer in flight, its backend call cancelled, is made
	c.stopped = true
	c.mu.Unlock()
}

// close stops answering (see stop) and waits for the socket's goroutines;
// an abstract socket leaves nothing else to remove.
func (c *control) close() {
	if c == nil {
		return
	}
	c.stop()
	c.wg.Wait()
}

func (c *control) accept() {
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return // closed
		}
		if !samePrincipal(conn) {
			conn.Close() // another local user: an abstract socket has no file mode
			continue
		}
		c.wg.Go(func() { c.handle(conn) })
	}
}

// samePrincipal reports whether conn's peer runs as this process's user
// or as root: who may connect to a 0700 directory's socket.
func samePrincipal(conn net.Conn) bool {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	var credErr error
	err = raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || credErr != nil {
		return false
	}
	return cred.Uid == 0 || int(cred.Uid) == os.Geteuid()
}

func (c *control) handle(conn net.Conn) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(controlTimeout))
	var req ControlRequest
	ans := ControlAnswer{Status: StatusError, Kind: KindUsage, Message: "malformed request"}
	if err := json.NewDecoder(io.LimitReader(conn, maxRequest)).Decode(&req); err == nil {
		ctx, cancel := context.WithTimeout(c.ctx, controlTimeout)
		ans = c.answer(ctx, req)
		cancel()
	}
	if err := c.deliver(conn, req.Op, ans); err != nil {
		c.log.Debug("control: answer not delivered", "op", req.Op, "err", err)
	}
}

// deliver writes ans under mu, so that a fence check made before stop is
// not read after the release: stop no longer waits for the socket's
// goroutines, so such an answer is a refusal once stop has begun. The
// largest answer (a 64 KB checkpoint, about 90 KB of JSON) fits a Unix
// socket's buffer, so the write does not wait for the client to read; on
// a host whose buffers are smaller, stop waits for it at most until the
// connection's deadline, as it waited for every handler before.
func (c *control) deliver(conn net.Conn, op string, ans ControlAnswer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op == OpFenceCheck && ans.Status == StatusOK && c.stopped {
		ans = c.refused()
	}
	return json.NewEncoder(conn).Encode(ans)
}
