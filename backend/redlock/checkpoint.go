package redlock

import (
	"bytes"
	"context"
	_ "embed" // the script lives in lua/checkpoint.lua
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.Checkpointer = (*Backend)(nil)

//go:embed lua/checkpoint.lua
var checkpointLua string

var checkpointScript = goredis.NewScript(checkpointLua)

// checkpointKey holds "TOKEN VALUE" on each master, in the lock's slot.
func (b *Backend) checkpointKey(key string) string { return b.prefix + "{" + key + "}:checkpoint" }

// SetCheckpoint stores value on every master where the lock is held with
// token (and no newer checkpoint is stored); it succeeds when a majority
// stored it, and is refused (ErrLost) when too many masters refused for a
// majority. A majority is needed because a later GetCheckpoint reads one:
// any two majorities share a master.
func (b *Backend) SetCheckpoint(ctx context.Context, key string, token backend.Token, value []byte) error {
	if err := backend.ValidateCheckpoint(key, token, value); err != nil {
		return err
	}
	keys := []string{b.names(key).lock, b.checkpointKey(key)}
	seq := strconv.FormatInt(b.checkpointSeq(), 10)
	b.cpWrites.RLock()
	var writes sync.WaitGroup
	writes.Add(len(b.masters))
	go func() { writes.Wait(); b.cpWrites.RUnlock() }()
	rs := fanout(ctx, b.masters, func(ctx context.Context, m *master) (int64, error) {
		defer writes.Done()
		return checkpointScript.Run(ctx, m.client, keys, token.String(), seq, value).Int64()
	}, func(rs []reply[int64]) bool { return b.settled(tally(rs, stored)) })
	ayes, noes, _ := tally(rs, stored)
	switch {
	case ayes >= b.quorum:
		return nil
	case noes > len(b.masters)-b.quorum:
		return fmt.Errorf("%w: checkpoint of %q refused: token %v is not the holder's on a majority", backend.ErrLost, key, token)
	}
	return b.noQuorum("writing the checkpoint of", key, answered(rs), errorsOf(rs))
}

func stored(n int64) bool { return n == 1 }

// checkpointSeq orders one holder's checkpoints: a master that missed the
// latest write (a majority had answered without it) keeps an older value
// under the same token, and a read must not return it. The clock in
// nanoseconds, made strictly increasing within this process, through
// which all of a holder's writes go.
func (b *Backend) checkpointSeq() int64 {
	for {
		last, now := b.lastSeq.Load(), time.Now().UnixNano()
		next := max(now, last+1)
		if b.lastSeq.CompareAndSwap(last, next) {
			return next
		}
	}
}

// GetCheckpoint reads every master and returns the latest checkpoint
// (highest token, then highest seq) among a majority's answers.
func (b *Backend) GetCheckpoint(ctx context.Context, key string) (backend.Checkpoint, bool, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Checkpoint{}, false, err
	}
	rs := fanout(ctx, b.masters, func(ctx context.Context, m *master) ([]byte, error) {
		v, err := m.client.Get(ctx, b.checkpointKey(key)).Bytes()
		if errors.Is(err, goredis.Nil) {
			return nil, nil
		}
		return v, err
	}, nil)
	if got := answered(rs); got < b.quorum {
		return backend.Checkpoint{}, false, b.noQuorum("reading the checkpoint of", key, got, errorsOf(rs))
	}
	var best backend.Checkpoint
	var bestSeq uint64
	found := false
	for _, r := range rs {
		if r.err != nil || r.v == nil {
			continue
		}
		parts := bytes.SplitN(r.v, []byte(" "), 3)
		if len(parts) != 3 {
			return backend.Checkpoint{}, false, fmt.Errorf("%w: checkpoint of %q on %s", errMalformed, key, r.m.addr)
		}
		t, err := parseToken(string(parts[0]))
		seq, serr := strconv.ParseUint(string(parts[1]), 10, 64)
		if err != nil || serr != nil {
			return backend.Checkpoint{}, false, fmt.Errorf("%w: checkpoint of %q on %s", errMalformed, key, r.m.addr)
		}
		if !found || t > best.Token || t == best.Token && seq > bestSeq {
			best, bestSeq, found = backend.Checkpoint{Value: parts[2], Token: t}, seq, true
		}
	}
	return best, found, nil
}

// ClearCheckpoint deletes key's checkpoint on every master. Any master
// not answering is an error: a copy left there would come back, as the
// highest token read, once that master answers again. It first waits for
// this process's checkpoint writes still in flight (SetCheckpoint returns
// on a majority): one landing after the delete would bring the value
// back. A write from another process that returned just before the clear
// and is still on its way to a slow master can do so all the same.
func (b *Backend) ClearCheckpoint(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	b.cpWrites.Lock()
	defer b.cpWrites.Unlock()
	rs := fanout(ctx, b.masters, func(ctx context.Context, m *master) (int64, error) {
		return m.client.Del(ctx, b.checkpointKey(key)).Result()
	}, nil)
	if got := answered(rs); got < len(b.masters) {
		return b.noQuorum("clearing the checkpoint of", key, got, errorsOf(rs))
	}
	return nil
}
