package zookeeper

import (
	"cmp"
	"context"
	"errors"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
)

// lockInfix is what Curator's InterProcessMutex puts before the sequence
// number of its contender nodes; lockrun names its own the same way.
const lockInfix = "-lock-"

// seq is the sequence number at the end of a contender's name (ten
// digits, from the parent's counter); ok is false for a child that is no
// sequential node.
func seq(name string) (int64, bool) {
	if len(name) < 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[len(name)-10:], 10, 64)
	return n, err == nil && n >= 0
}

// contenders returns the sequential children of the lock node in queue
// order, lowest (the holder) first; a lock node that does not exist has
// none.
func contenders(ctx context.Context, b *Backend, s *session, key string) ([]string, error) {
	kids, err := call(ctx, b.cfg.RequestTimeout, func() ([]string, error) {
		kids, _, err := s.conn.Children(b.lockPath(key))
		return kids, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return inQueueOrder(kids), nil
}

// inQueueOrder keeps the sequential children of kids, sorted by sequence
// number.
func inQueueOrder(kids []string) []string {
	kids = slices.DeleteFunc(kids, func(k string) bool { _, ok := seq(k); return !ok })
	slices.SortFunc(kids, func(a, b string) int {
		x, _ := seq(a)
		y, _ := seq(b)
		return cmp.Compare(x, y)
	})
	return kids
}

// nodeName is the prefix of a contender's node: Curator's protected-mode
// shape ("_c_<id>-lock-"), with the run id in place of Curator's UUID,
// and for a semaphore of limit N the limit before the infix
// ("_c_<id>-nN-lock-"). The safe run id has no '-', so the first '-'
// ends it, and every contender can tell the limit of each node ahead of
// it from the name alone, with no read of its data.
func nodeName(runID string, limit int) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, runID)
	if limit > 1 {
		return "_c_" + safe + "-n" + strconv.Itoa(limit) + lockInfix
	}
	return "_c_" + safe + lockInfix
}

// nodeLimit is the limit a contender node was queued with: N for a
// lockrun semaphore's "_c_<id>-nN-lock-<seq>", and 1 for everything
// else, a lockrun plain lock's node (of any version) or another client's
// (Curator's and kazoo's mutexes): a node that does not say otherwise
// holds the key alone.
func nodeLimit(name string) int {
	rest, ok := strings.CutPrefix(name, "_c_")
	if !ok {
		return 1
	}
	_, rest, _ = strings.Cut(rest, "-")
	n, ok := strings.CutPrefix(rest, "n")
	if !ok {
		return 1
	}
	digits, _, ok := strings.Cut(n, lockInfix)
	if !ok {
		return 1
	}
	limit, err := strconv.Atoi(digits)
	if err != nil || limit < 2 {
		return 1
	}
	return limit
}

// nodeRun is the safe run id in a lockrun contender's name ("" for a
// node of another client): a retried Acquire finds its own earlier node.
func nodeRun(name string) string {
	rest, ok := strings.CutPrefix(name, "_c_")
	if !ok {
		return ""
	}
	run, _, ok := strings.Cut(rest, "-")
	if !ok {
		return ""
	}
	return run
}

// otherLimit is the limit of the first node of ahead whose limit is not
// limit, or 0 when all of them share it.
func otherLimit(ahead []string, limit int) int {
	for _, k := range ahead {
		if l := nodeLimit(k); l != limit {
			return l
		}
	}
	return 0
}

// enqueue creates this run's ephemeral sequential contender node under
// key's lock node, creating the lock node (and the root and state
// directory) when missing, and returns its full path.
func enqueue(ctx context.Context, b *Backend, s *session, key string, limit int, data []byte) (string, error) {
	name := b.lockPath(key) + "/" + nodeName(parseRunID(data), limit)
	for range 3 {
		p, err := call(ctx, b.cfg.RequestTimeout, func() (string, error) {
			return s.conn.Create(name, data, zk.FlagEphemeralSequential, b.acl)
		})
		if !errors.Is(err, zk.ErrNoNode) {
			return p, err
		}
		if err := b.ensure(ctx, s, b.lockPath(key)); err != nil {
			return "", err
		}
	}
	return "", zk.ErrNoNode
}

// ensure creates p as a persistent node, and its missing ancestors first;
// nodes that exist are left alone (their ACLs may not let us create).
func (b *Backend) ensure(ctx context.Context, s *session, p string) error {
	for range 2 {
		_, err := call(ctx, b.cfg.RequestTimeout, func() (string, error) {
			return s.conn.Create(p, nil, zk.FlagPersistent, b.acl)
		})
		switch {
		case err == nil || errors.Is(err, zk.ErrNodeExists):
			return nil
		case !errors.Is(err, zk.ErrNoNode) || path.Dir(p) == "/":
			return err
		}
		if err := b.ensure(ctx, s, path.Dir(p)); err != nil {
			return err
		}
	}
	return zk.ErrNoNode
}

func parseRunID(data []byte) string {
	c, _ := parseContender(data)
	return c.RunID
}
