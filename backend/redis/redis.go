// Package redis is lockrun's Redis backend. A lock is a string key set with
// PX ttl whose value names the token, the run and the holder; every change
// to it is a Lua script that checks that value first, so acquire, renew and
// release are owner-checked and atomic on the server, one round trip each.
//
// Keys live under a prefix (default "lockrun:") with one hash tag per lock,
// so that the lock, its token counter and its waiters' queue share one
// Redis Cluster slot: lockrun:{KEY}:lock, lockrun:{KEY}:token,
// lockrun:{KEY}:queue, and the channels lockrun:{KEY}:wake:WAITER.
//
// Fencing tokens: a grant takes the last token plus one, and never less
// than the server's TIME in microseconds. The counter alone would restart
// at 1 after FLUSHALL, a restart without persistence or a failover to a
// replica that missed writes; the clock keeps the token above everything
// handed out before, provided the server's clock (every replica's) never
// steps back by more than the time between the last grant before the loss
// and the first after it. The counter is read and compared as text, never
// as a Lua number (a double, exact only up to 2^53), so tokens are exact
// up to INCR's limit, 2^63-1; past it a grant fails with
// backend.ErrTokenRange.
//
// A restart may lose data (nothing persisted, an old snapshot, the last
// second of AOF), and with it a lock whose holder still runs until its
// next renewal fails: so no free lock is granted while the server has been
// up for less than the restart wait (restart_wait, by default the run's
// TTL or its min-hold if longer; see restart_left in lua/lib.lua).
//
// Semaphores (AcquireOptions.Limit > 1) keep their holders beside the
// plain lock's key, under the same hash tag: see semaphore.go.
//
// Waiting: a waiter subscribes to its own channel, then tries; when the
// lock is held the same script puts it in a queue ordered by arrival. A
// release pops the queue until a PUBLISH reaches a live waiter, so each
// hand-off wakes one waiter, not all of them. Waiters also wake when the
// holder's lease can have expired (its PTTL), which covers a holder that
// died without releasing and a waiter that was told but never came.
package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
)

// DefaultPrefix starts the name of every key this backend writes.
const DefaultPrefix = "lockrun:"

// Backend keeps locks in one Redis server (or the primary of a replicated
// one). It is safe for concurrent use.
type Backend struct {
	client *goredis.Client
	opt    *goredis.Options
	url    string // redacted, for messages
	prefix string
	// restartWait is how long after the server's start a free lock stays
	// closed (negative: the run's TTL); see lua/lib.lua's restart_left.
	restartWait time.Duration
	scripts     scripts
}

// probe makes the first connection (and PING) before any lock is asked
// for, with backend.Probe's retries, so that a server restarting at that
// moment does not fail a cron job; an error the server answers with
// (credentials, ACL) is final at once. A server that stays down fails
// here, as one error, instead of at every call of the runner. The error
// does not repeat the URL: OpenURL's caller names it. One try may take
// the dial timeout plus the read timeout.
func (b *Backend) probe(ctx context.Context) error {
	err := backend.Probe(ctx, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, b.opt.DialTimeout+b.opt.ReadTimeout)
		defer cancel()
		return b.client.Ping(ctx).Err()
	}, func(err error) bool {
		var answered goredis.Error // the server answered: wrong password, ACL...
		return errors.As(err, &answered)
	})
	if err != nil {
		return fmt.Errorf("%w: connecting to redis: %w", class(err), err)
	}
	return nil
}

// Close closes the backend's connections.
func (b *Backend) Close() error { return b.client.Close() }

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Lease   = (*lease)(nil)
)

// names are the Redis names of one lock's parts: all carry the same hash
// tag, hence the same cluster slot.
type names struct {
	lock, counter, queue string
	wake                 string // prefix of the waiters' channels
	meta                 string // the holder's record: see record.go
	// sem is a semaphore's parts, in the order lua/sem.lua's sem_keys
	// reads them: limit, slots, records, queue, queue entries' ends.
	sem []string
}

func (b *Backend) names(key string) names {
	base := b.prefix + "{" + key + "}:"
	return names{lock: base + "lock", counter: base + "token", queue: base + "queue", wake: base + "wake:", meta: base + "meta",
		sem: []string{base + "limit", base + "slots", base + "slotrec", base + "slotq", base + "slotqend"}}
}

// with is keys followed by the semaphore's parts, for the scripts that
// read both.
func (n names) with(keys ...string) []string { return append(keys, n.sem...) }

// errMalformed means a reply or a stored value is not what lockrun writes:
// someone else uses the same keys.
var errMalformed = errors.New("unexpected data")

// unavailable wraps an error from the server or the network: transient,
// unless the server refused who we are or what we asked (see class).
func (b *Backend) unavailable(op, key string, err error) error {
	return fmt.Errorf("%w: redis %s: %s %q: %w", class(err), b.url, op, key, err)
}

// class is the sentinel for err: backend.ErrPermission when the server
// refused the credentials or an ACL forbids the command or keys (WRONGPASS,
// NOAUTH, NOPERM), backend.ErrConfig when the URL names a database the
// server does not have, else backend.ErrUnavailable. Retrying cures only
// the last.
func class(err error) error {
	var answered goredis.Error
	if !errors.As(err, &answered) {
		return backend.ErrUnavailable
	}
	msg := answered.Error()
	for _, code := range []string{"NOPERM", "WRONGPASS", "NOAUTH"} {
		if strings.HasPrefix(msg, code) {
			return backend.ErrPermission
		}
	}
	// A command a script calls, refused by an ACL: Redis 7.0 words it
	// the first way, 7.2 and Valkey the second.
	if strings.Contains(msg, "can't run this command") || strings.Contains(msg, "ACL failure in script") {
		return backend.ErrPermission
	}
	if strings.Contains(msg, "DB index is out of range") || strings.Contains(msg, "invalid DB index") {
		return backend.ErrConfig
	}
	return backend.ErrUnavailable
}

// parseValue reads a lock value, which acquire.lua writes as
// "TOKEN RUN HOLDER": the token makes it unique per grant, and the holder
// comes last since it may contain spaces.
func parseValue(key, v string, pttl time.Duration) (backend.Status, error) {
	parts := strings.SplitN(v, " ", 3)
	if len(parts) != 3 {
		return backend.Status{}, fmt.Errorf("%w: lock value %q", errMalformed, v)
	}
	tok, err := strconv.ParseUint(parts[0], 10, 64)
	if err != nil {
		return backend.Status{}, fmt.Errorf("%w: lock value %q", errMalformed, v)
	}
	return backend.Status{Key: key, Held: true, Token: backend.Token(tok), RunID: parts[1], Holder: parts[2], TTL: max(pttl, 0)}, nil
}

// millis is d in whole milliseconds, rounded up: Redis counts in ms, and
// the granted TTL must not be shorter than the one asked for.
func millis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond) // d+999999 first would overflow near the limit
	if d%time.Millisecond > 0 {
		ms++
	}
	return max(ms, 1)
}

// acquireFailed wraps an error of acquire.lua: the counter's own refusal
// to grow (see next_token in lib.lua) is backend.ErrTokenRange, anything
// else is unavailable.
func (b *Backend) acquireFailed(key string, err error) error {
	var reply goredis.Error
	if errors.As(err, &reply) && strings.HasPrefix(reply.Error(), "TOKENRANGE ") {
		return fmt.Errorf("redis %s: lock %q: %w (counter %s)", b.url, key, backend.ErrTokenRange, strings.TrimPrefix(reply.Error(), "TOKENRANGE "))
	}
	if errors.As(err, &reply) && strings.HasPrefix(reply.Error(), "RESTARTWAIT ") {
		return fmt.Errorf("%w: redis %s: lock %q: %s (see restart_wait)", backend.ErrConfig, b.url, key, strings.TrimPrefix(reply.Error(), "RESTARTWAIT "))
	}
	return b.unavailable("acquire", key, err)
}
