// Package zookeeper is lockrun's backend for Apache ZooKeeper: the
// ephemeral-sequential lock recipe, one session per lease, FIFO waiting in
// which each waiter watches only its predecessor, and fencing tokens kept
// in a per-key record that only the holder writes.
//
// Layout below the root R (the URL's path, default /lockrun), for key K:
//
//	R/K                         the lock's node; its children contend:
//	R/K/_c_<run>-lock-<seq>     one ephemeral sequential node per holder or
//	                            waiter, owned by its session; the lowest
//	                            sequence number holds the lock
//	R/K/_c_<run>-nN-lock-<seq>  the same for a semaphore of limit N: a node
//	                            holds a slot when fewer than N nodes (less
//	                            the slots kept for a min-hold) are ahead
//	R/.state/K                  the last token issued for K and, while a
//	                            released lock (or semaphore slot) is kept
//	                            for --min-hold, until when and for whom
//
// Every contender reads the limit of each node ahead of it from its name,
// on every read of the queue, and fails with a *backend.LimitError when
// one differs: sequence numbers follow the order of creation, and a
// contender reads the queue after its own node was created, so of two
// nodes of different limits the later sees the earlier unless it is gone.
// A node granted a slot saw only nodes of its own limit ahead, fewer than
// it, and nodes only ever join behind it: every live holder has the limit
// of the newest holder, and there are no more than it.
//
// R/K is laid out as Apache Curator's InterProcessMutex lays out its lock
// path (children named "...-lock-<seq>", the lowest holds), so a Curator
// mutex on R/K and lockrun exclude each other.
//
// The client is github.com/go-zookeeper/zk: maintained, no global state
// (its logger is set per connection), and it keeps a session across
// reconnects. It takes no context: every request here runs under one
// through call. When the server expires a session, the library opens a new
// one on the same connection without telling its caller; session watches
// for that and reports the lease lost.
package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/backend"
)

// DefaultTTL is lockrun's default --ttl. The backend's own session is
// asked for it plus a tick, as a lease's session with that TTL is (see
// Acquire), so that the first such Acquire can take it over instead of
// opening a second session: a run pays for one session, not two. It is
// also long enough to ride out a leader election, and its pings (a third
// of it apart) cost the server little.
const DefaultTTL = 30 * time.Second

// Backend takes locks in one ZooKeeper ensemble. It is safe for concurrent
// use.
type Backend struct {
	cfg  Config
	addr string // for messages: the servers and root, never a password
	acl  []zk.ACL

	mu     sync.Mutex
	admin  *session              // for Inspect, List, ForceRelease; nil until needed again
	spare  bool                  // admin was opened for DefaultTTL and no lease took it yet
	used   bool                  // admin was handed to a request of the backend's own
	leases map[*session]struct{} // every lease's session, closed by Close
}

// OpenURL opens the backend that u names (see ParseURL), with credentials
// and TLS files possibly taken from LOCKRUN_ZK_* variables.
func OpenURL(ctx context.Context, u *url.URL) (*Backend, error) {
	cfg, err := ParseURL(u, os.Getenv)
	if err != nil {
		return nil, err
	}
	return Open(ctx, cfg)
}

// Open connects to the ensemble and opens the backend's own session: an
// unreachable ensemble fails here, within about 0.6 s when every server
// refuses, with an error wrapping backend.ErrUnavailable.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	scheme := "zk://"
	if cfg.TLS != nil {
		scheme = "zks://"
	}
	b := &Backend{cfg: cfg, addr: scheme + strings.Join(cfg.Servers, ",") + cfg.Root, leases: map[*session]struct{}{}}
	b.acl = zk.WorldACL(zk.PermAll)
	if cfg.User != "" {
		b.acl = zk.DigestACL(zk.PermAll, cfg.User, cfg.Password)
	}
	var s *session
	err := backend.Probe(ctx, func(ctx context.Context) (err error) {
		s, err = connect(ctx, cfg, DefaultTTL+cfg.TickTime)
		return err
	}, isPermission)
	if err != nil {
		return nil, b.failed(ctx, "connecting", "", err)
	}
	b.admin, b.spare = s, true
	return b, nil
}

// Close ends the backend's sessions, its leases' included: the server
// deletes their nodes at once.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.admin != nil {
		b.admin.close()
		b.admin = nil
	}
	for s := range b.leases {
		s.close()
	}
	clear(b.leases)
	return nil
}

// adminSession returns a session for the backend's own requests: its own
// session, else a live lease's (a run's checkpoints need no second
// session), else a new one of its own.
func (b *Backend) adminSession(ctx context.Context) (*session, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.admin != nil && !b.admin.lost() {
		b.used = true
		return b.admin, nil
	}
	for s := range b.leases {
		if !s.lost() {
			return s, nil
		}
	}
	s, err := connect(ctx, b.cfg, DefaultTTL+b.cfg.TickTime)
	if err != nil {
		return nil, err
	}
	b.admin, b.used = s, true
	return s, nil
}

// takeSpare hands the backend's own session to a lease of ttl, once, when
// it was asked for the same timeout and holds nothing; the backend opens
// another for itself when it needs one.
func (b *Backend) takeSpare(ttl time.Duration) *session {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.admin
	if !b.spare || ttl != DefaultTTL || s == nil || s.lost() {
		return nil
	}
	b.admin, b.spare = nil, false
	return s
}

// dropSpare closes the backend's own session when a lease of another TTL
// has opened one of its own and no request used the backend's: a run then
// holds one session, not two, and one session's pings reach the ensemble.
// A later request of the backend's own uses the lease's (adminSession).
func (b *Backend) dropSpare() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spare && !b.used && b.admin != nil {
		// Closed outside b.mu: the library waits up to a second for the
		// server's answer, and the Acquire need not.
		go b.admin.close()
		b.admin, b.spare = nil, false
	}
}

// track and untrack keep the set of lease sessions that Close ends.
func (b *Backend) track(s *session) {
	b.mu.Lock()
	b.leases[s] = struct{}{}
	b.mu.Unlock()
}

func (b *Backend) untrack(s *session) {
	b.mu.Lock()
	delete(b.leases, s)
	b.mu.Unlock()
	s.close()
}

// isPermission tells whether err is the server refusing who we are.
func isPermission(err error) bool {
	return errors.Is(err, zk.ErrNoAuth) || errors.Is(err, zk.ErrAuthFailed)
}

// failed wraps err from a request made under ctx: the caller's own
// cancellation is returned as its cause; an auth refusal is ErrPermission,
// an ACL the server rejects ErrConfig, anything else ErrUnavailable (the
// contract keeps ErrLost for what the server proves).
func (b *Backend) failed(ctx context.Context, op, key string, err error) error {
	where := b.addr
	if key != "" {
		where += fmt.Sprintf(": lock %q", key)
	}
	switch {
	case context.Cause(ctx) != nil:
		return fmt.Errorf("%s: %s: %w", where, op, context.Cause(ctx))
	case isPermission(err):
		return fmt.Errorf("%w: %s: %s: %w (check the digest user and password, and the nodes' ACLs)", backend.ErrPermission, where, op, err)
	case errors.Is(err, zk.ErrInvalidACL):
		return fmt.Errorf("%w: %s: %s: %w", backend.ErrConfig, where, op, err)
	}
	return fmt.Errorf("%w: %s: %s: %w", backend.ErrUnavailable, where, op, err)
}

// lost wraps a proof that a lease no longer owns its lock.
func (b *Backend) lost(key, why string) error {
	return fmt.Errorf("%w: %s: lock %q: %s", backend.ErrLost, b.addr, key, why)
}

// lockPath is the node whose children contend for key.
func (b *Backend) lockPath(key string) string { return b.cfg.Root + "/" + key }

// stateDir holds one record per key; its name cannot be a key.
func (b *Backend) stateDir() string { return b.cfg.Root + "/.state" }

// statePath is key's record: last token and min-hold.
func (b *Backend) statePath(key string) string { return b.stateDir() + "/" + key }
