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
	kids = slices.DeleteFunc(kids, func(k string) bool { _, ok := seq(k); return !ok })
	slices.SortFunc(kids, func(a, b string) int {
		x, _ := seq(a)
		y, _ := seq(b)
		return cmp.Compare(x, y)
	})
	return kids, nil
}

// nodeName is the prefix of a contender's node: Curator's protected-mode
// shape ("_c_<id>-lock-"), with the run id in place of Curator's UUID.
func nodeName(runID string) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, runID)
	return "_c_" + safe + lockInfix
}

// enqueue creates this run's ephemeral sequential contender node under
// key's lock node, creating the lock node (and the root and state
// directory) when missing, and returns its full path.
func enqueue(ctx context.Context, b *Backend, s *session, key string, data []byte) (string, error) {
	name := b.lockPath(key) + "/" + nodeName(parseRunID(data))
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
