// Package redlock is lockrun's Redlock backend: one lock kept on several
// independent Redis masters (no replication between them), held while a
// majority of them hold it. Every change on a master is a Lua script that
// checks the lease's value first, as in package redis, whose URL options,
// key layout and wake-ups it shares.
//
// Acquire reads a majority's views and token counters (one round trip to
// every master at once), then sets the lock with a token above all of
// them on every master at once; it holds when a majority granted it within
// the lease's validity. A master grants only a token above its own
// counter, so the tokens of two grants that share a master (any two
// majorities do) are ordered by that master: see docs/backends/redlock.md
// for the argument and its limits. Renew succeeds on a majority or the
// lease counts as lost; Release gives the lock up on every master.
//
// Waiting: a waiter subscribes to its own channel on every master and is
// queued on each by the same place (its local start time in µs), so a
// release on any master wakes it; it also wakes when the holder's lease
// can have expired.
package redlock

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
)

// MinMasters is the fewest masters a redlock URL may name: with fewer, a
// majority is every master and one lost master stops every lock.
const MinMasters = 3

// Backend keeps locks on a set of independent Redis masters. It is safe
// for concurrent use.
type Backend struct {
	masters []*master
	quorum  int              // a majority of the masters
	opt     *goredis.Options // the first master's; timeouts are the same for all
	url     string           // redacted, for messages
	prefix  string
	scripts scripts
	// restartWait is the URL's restart_wait (see redis.RestartWait): a
	// master up for less grants nothing new (lua/grant.lua).
	restartWait time.Duration
	lastSeq     atomic.Int64 // the last checkpoint's seq (see checkpointSeq)
	// cpWrites is read-held by each SetCheckpoint until every master has
	// answered its write, past the majority it returned on; a clear takes
	// it whole, so that no write of this process lands after it.
	cpWrites sync.RWMutex
}

// master is one Redis server of the set.
type master struct {
	client *goredis.Client
	addr   string
}

// Close closes the connections to every master.
func (b *Backend) Close() error {
	var errs []error
	for _, m := range b.masters {
		errs = append(errs, m.client.Close())
	}
	return errors.Join(errs...)
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Lease   = (*lease)(nil)
)

// names are one lock's Redis names, as package redis lays them out, plus
// the holder's record.
type names struct {
	lock, counter, queue, record string
	ended, endFloor, refused     string // the grant history: see lua/ended.lua
	wake                         string // prefix of the waiters' channels
	// sem is a semaphore's parts, as package redis lays them out (limit,
	// slots, records, queue, queue entries' ends), and slotOf its slot
	// indexes: see semaphore.go.
	sem    []string
	slotOf string
}

func (b *Backend) names(key string) names {
	base := b.prefix + "{" + key + "}:"
	return names{lock: base + "lock", counter: base + "token", queue: base + "queue", record: base + "holder", ended: base + "ended", endFloor: base + "endfloor", refused: base + "refused", wake: base + "wake:",
		sem: []string{base + "limit", base + "slots", base + "slotrec", base + "slotq", base + "slotqend"}, slotOf: base + "slotof"}
}

// with is keys followed by the semaphore's parts, for the scripts that
// read both.
func (n names) with(keys ...string) []string { return append(keys, n.sem...) }

// endedKeys are the keys lua/ended.lua reads, in its order, after keys.
func (n names) endedKeys(keys ...string) []string {
	return append(keys, n.counter, n.ended, n.endFloor, n.refused)
}

// endedKeep is how long a grant ended on a master where its lease's TTL is
// unknown counts as ended there: longer than any refusal of a grant counts
// (two TTLs, see lua/grant.lua), whatever lockrun's TTL (at most a year).
const endedKeep = 3 * 8760 * time.Hour

// errMalformed means a reply or a stored value is not what lockrun writes:
// someone else uses the same keys.
var errMalformed = errors.New("unexpected data")

// parseValue reads a lock value, which grant.lua writes as
// "TOKEN RUN HOLDER"; the holder comes last since it may contain spaces.
func parseValue(key, v string, pttl time.Duration) (backend.Status, error) {
	parts := strings.SplitN(v, " ", 3)
	if len(parts) != 3 {
		return backend.Status{}, fmt.Errorf("%w: lock value %q", errMalformed, v)
	}
	tok, err := parseToken(parts[0])
	if err != nil {
		return backend.Status{}, fmt.Errorf("%w: lock value %q", errMalformed, v)
	}
	return backend.Status{Key: key, Held: true, Token: tok, RunID: parts[1], Holder: parts[2], TTL: max(pttl, 0)}, nil
}

// millis is d in whole milliseconds, rounded up: Redis counts in ms.
func millis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond) // d+999999 first would overflow near the limit
	if d%time.Millisecond > 0 {
		ms++
	}
	return max(ms, 1)
}
