// Package etcd is lockrun's backend for etcd v3: one lease per holder, the
// lock taken in a transaction, FIFO waiting, and a fencing token on the
// wall clock's scale kept in a per-key counter.
//
// Layout under the prefix P (default /lockrun/), for lock key K:
//
//	P K/t<token>-<lease>   one queue entry per contender, attached to its
//	                       lease; the entry with the lowest create
//	                       revision holds the lock (names sort in queue
//	                       order: see entryTag)
//	P K/<lease id in hex>  the same, of etcdctl lock and earlier builds
//	P K/limit-NNNN/<lease> the same for a semaphore of limit NNNN (see
//	                       semaphore.go): an entry holds a slot while
//	                       fewer than NNNN entries are older
//	P K                    the token counter, written with every queue
//	                       entry: the highest token handed out or reserved
//	                       for K, so the next holder's token is higher
//
// Entries queue by create revision, as in etcd's concurrency.Mutex, so
// `etcdctl lock P K` and lockrun exclude each other.
//
// Tokens: a queue entry carries its token, written in the transaction
// that queues it together with the counter, and only while the counter is
// below it (see enqueueTxn). The token is the local wall clock in
// microseconds, or the counter plus one when that clock is behind it, so
// tokens are on the scale of the other backends' and keep growing when the
// cluster's data is lost: a wiped cluster has no counter, and starts again
// from the clock. The holder is always the oldest live entry, and entries
// are queued in the counter's order, so every grant's token is above the
// one before. A host whose clock is behind the counter costs a round trip
// more (it counts on from the counter); one whose clock is ahead pushes
// the counter ahead with it. After a wipe the tokens stay above the old
// ones if the first host to queue has a clock ahead of the last token
// issued before: no clock that issued tokens ran ahead of it by more than
// the time between the last grant before the loss and the first after.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lockrun/lockrun/backend"
)

// Backend takes locks in one etcd cluster. It is safe for concurrent use.
type Backend struct {
	cli    *clientv3.Client
	leases pb.LeaseClient  // raw, for one keep-alive per call (see keepAlive)
	ka     keepAliveStream // the open keep-alive stream, reused
	kv     pb.KVClient     // raw, for the fail-fast probe
	cfg    Config
	addr   string // for messages: the endpoints, never a password

	mu       sync.Mutex
	closed   bool           // Close began: no more revokes in the background
	revoking sync.WaitGroup // revokeLater's requests in flight
	// shut ends every request made through bounded when Close closes
	// the client: the client library would retry one on a closed
	// connection until its deadline.
	shut       context.Context
	shutCancel context.CancelFunc
}

// OpenURL opens the backend that u names (see ParseURL), with TLS files
// and the password possibly taken from LOCKRUN_ETCD_* variables.
func OpenURL(ctx context.Context, u *url.URL) (*Backend, error) {
	cfg, err := ParseURL(u, os.Getenv)
	if err != nil {
		return nil, err
	}
	return Open(ctx, cfg)
}

// Open connects to etcd and checks that a member with a leader answers
// (see probe): an unreachable cluster fails here, within about 0.6 s when
// every endpoint refuses, with an error wrapping backend.ErrUnavailable.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	scheme := "etcd://"
	if cfg.TLS != nil {
		scheme = "etcds://"
	}
	b := &Backend{cfg: cfg, addr: scheme + strings.Join(cfg.Endpoints, ",")}
	b.shut, b.shutCancel = context.WithCancel(context.Background())
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		TLS:         cfg.TLS,
		Username:    cfg.Username,
		Password:    cfg.Password,
		DialTimeout: cfg.DialTimeout,
		// gRPC pings a silent connection so that a waiter's watch moves to
		// a live member instead of hanging on a dead one.
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			// Reconnect within a second of a restarted member coming
			// back, not after gRPC's default backoff of up to two
			// minutes, which would outlast the lease.
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: cfg.DialTimeout,
		})},
		Logger: zap.NewNop(), // errors reach the caller; nothing is printed
	})
	if err != nil {
		b.shutCancel()
		return nil, b.unavailable("connecting", "", err)
	}
	b.cli = cli
	b.leases = pb.NewLeaseClient(cli.ActiveConnection())
	b.kv = pb.NewKVClient(cli.ActiveConnection())
	if err := b.probe(ctx); err != nil {
		b.shutCancel()
		cli.Close()
		return nil, err
	}
	return b, nil
}

// Close waits for the revokes of released leases (see revokeLater), then
// closes the connections. A held lease is left to expire.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.revoking.Wait()
	b.shutCancel()
	b.ka.close()
	return b.cli.Close()
}

// revokeLater revokes lease id in the background, after a pause of after
// and within ctx's deadline and a request's timeout after the pause, but
// not ctx's cancellation: the caller returns before it is sent. The revoke of a
// released lease is clean-up (it holds nothing and would expire within its
// TTL), and waiting for it, a round trip and a WAL write, would keep the
// release's caller waiting, a run's exit among them. Close waits for it.
// A release that races with Close revokes at once, until Close closes the
// client: the lease then expires by itself.
func (b *Backend) revokeLater(ctx context.Context, id clientv3.LeaseID, after time.Duration) {
	deadline := time.Now().Add(after + b.cfg.RequestTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	rctx, cancel := context.WithDeadline(context.Background(), deadline)
	stop := context.AfterFunc(b.shut, cancel) // a revoke that races with Close
	b.mu.Lock()
	closed := b.closed
	if !closed {
		b.revoking.Add(1)
	}
	b.mu.Unlock()
	if closed {
		defer stop()
		defer cancel()
		_, _ = b.cli.Revoke(rctx, id) // ended by Close's closing of the client
		return
	}
	go func() {
		defer b.revoking.Done()
		defer stop()
		defer cancel()
		time.Sleep(min(after, time.Until(deadline)))
		_, _ = b.cli.Revoke(rctx, id) // if it fails, the lease expires by itself
	}()
}

// probe sends one serializable read that fails fast when every endpoint
// refuses connections (the client's own calls would wait for one to come
// up until their deadline) and fails when the member has no leader. It
// retries as backend.Probe does, so that an election or a member
// restarting just then does not fail a cron job; a refusal to serve this
// user is final at once.
func (b *Backend) probe(ctx context.Context) error {
	err := backend.Probe(ctx, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), b.cfg.DialTimeout)
		defer cancel()
		_, err := b.kv.Range(ctx, &pb.RangeRequest{Key: []byte(b.cfg.Prefix), Serializable: true, CountOnly: true}, grpc.WaitForReady(false))
		return err
	}, func(err error) bool {
		switch status.Code(err) {
		case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument:
			return true
		}
		return false
	})
	if err != nil {
		return b.unavailable("connecting", "", err)
	}
	return nil
}

// bounded limits one request to the request timeout, or ctx's earlier
// deadline, and ends it when the backend closes.
func (b *Backend) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.RequestTimeout)
	stop := context.AfterFunc(b.shut, cancel)
	return ctx, func() { stop(); cancel() }
}

// errLeaseGone means the server no longer knows a lease: it expired or
// was revoked, and every key attached to it is gone.
var errLeaseGone = errors.New("lease expired or revoked")

// unavailable wraps a failed request as transient: the contract keeps
// ErrLost for what the server proves, and everything else (refused
// connections, timeouts, no leader) may pass; a refusal of who we are or
// what we may touch is permanent (see class).
func (b *Backend) unavailable(op, key string, err error) error {
	where := b.addr
	if key != "" {
		where += fmt.Sprintf(": lock %q", key)
	}
	return fmt.Errorf("%w: %s: %s: %w", class(err), where, op, cleanErr(err))
}

// class is the sentinel for a failed request: backend.ErrPermission when
// etcd refused the user or the user's roles do not cover the keys,
// backend.ErrConfig when the URL gives a user but the cluster has auth
// disabled, else backend.ErrUnavailable.
func class(err error) error {
	switch rpctypes.Error(err) {
	case rpctypes.ErrAuthFailed, rpctypes.ErrPermissionDenied, rpctypes.ErrUserEmpty,
		rpctypes.ErrUserNotFound, rpctypes.ErrInvalidAuthToken, rpctypes.ErrInvalidAuthMgmt:
		return backend.ErrPermission
	case rpctypes.ErrAuthNotEnabled:
		return backend.ErrConfig
	}
	return backend.ErrUnavailable
}

// lost wraps a proof that a lease no longer owns its lock.
func (b *Backend) lost(key, why string) error {
	return fmt.Errorf("%w: %s: lock %q: %s", backend.ErrLost, b.addr, key, why)
}

// cleanErr shortens a gRPC error to its description, and a dial failure
// to the dialer's own words, keeping the error chain of context errors.
func cleanErr(err error) error {
	st, ok := status.FromError(err)
	if !ok || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	msg := st.Message()
	if _, dial, found := strings.Cut(msg, "Error while dialing: "); found {
		msg = strings.TrimSuffix(dial, `"`)
	}
	return errors.New(msg)
}

// isLeaseGone tells whether err is the server saying a lease is unknown.
func isLeaseGone(err error) bool {
	return errors.Is(err, errLeaseGone) || errors.Is(err, rpctypes.ErrLeaseNotFound)
}

// queuePrefix is where the key's queue entries live.
func (b *Backend) queuePrefix(key string) string { return b.cfg.Prefix + key + "/" }

// counterKey is the key whose mod revision is the last token handed out
// or reserved by a waiter.
func (b *Backend) counterKey(key string) string { return b.cfg.Prefix + key }
