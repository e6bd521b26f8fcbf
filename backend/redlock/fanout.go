package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
)

// reply is one master's answer to one call.
type reply[T any] struct {
	m   *master
	v   T
	err error
}

// fanout calls f on every master at once and collects the replies until
// decided says the outcome is known (given the replies so far) or every
// master has answered. Calls still running then go on in the background
// under their own context and are ignored: a master that is down or cut
// off costs nothing while a majority answers.
func fanout[T any](ctx context.Context, ms []*master, f func(context.Context, *master) (T, error), decided func([]reply[T]) bool) []reply[T] {
	return collect(ctx, ms, f, decided, 0)
}

// fanoutLinger is fanout, except that once decided it still waits, up to
// linger, for the masters yet to answer: a healthy master, even on a
// loaded host, is rarely that far behind the others, and its reply may
// change the outcome (see peek); a master that hangs costs linger.
func fanoutLinger[T any](ctx context.Context, ms []*master, f func(context.Context, *master) (T, error), decided func([]reply[T]) bool, linger time.Duration) []reply[T] {
	return collect(ctx, ms, f, decided, linger)
}

func collect[T any](ctx context.Context, ms []*master, f func(context.Context, *master) (T, error), decided func([]reply[T]) bool, linger time.Duration) []reply[T] {
	ch := make(chan reply[T], len(ms))
	for _, m := range ms {
		go func() {
			v, err := f(ctx, m)
			ch <- reply[T]{m: m, v: v, err: err}
		}()
	}
	var got []reply[T]
	for len(got) < len(ms) {
		got = append(got, <-ch)
		if decided != nil && decided(got) {
			break
		}
	}
	if linger <= 0 || len(got) == len(ms) {
		return got
	}
	grace := time.NewTimer(linger)
	defer grace.Stop()
	for len(got) < len(ms) {
		select {
		case r := <-ch:
			got = append(got, r)
		case <-grace.C:
			return got
		}
	}
	return got
}

// maxLinger caps how long a decided call waits for the last masters.
const maxLinger = 100 * time.Millisecond

// linger is how long a decided call of a lease of ttl waits for the last
// masters: a quarter of its round's timeout, at most maxLinger.
func (b *Backend) linger(ttl time.Duration) time.Duration {
	return min(b.callTimeout(ttl)/4, maxLinger)
}

// detached is a context for calls that may outlive their fanout: free of
// ctx's cancellation, but ending by ctx's deadline and within d at most,
// whichever comes first; stop cancels it once its calls are done with.
func detached(ctx context.Context, d time.Duration) (calls context.Context, stop func()) {
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	calls, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	return calls, func() { time.AfterFunc(d, cancel) }
}

// answered counts the replies without an error.
func answered[T any](rs []reply[T]) int {
	n := 0
	for _, r := range rs {
		if r.err == nil {
			n++
		}
	}
	return n
}

// noQuorum is the error of a call that fewer than a majority answered: it
// wraps backend.ErrPermission when a master refused our credentials, else
// backend.ErrConfig when one has no such database (no retry will help),
// else backend.ErrUnavailable, and names each failure.
func (b *Backend) noQuorum(op, key string, answered int, errs []error) error {
	kind := backend.ErrUnavailable
	var msgs []string
	for _, err := range errs {
		if refused(err) {
			kind = backend.ErrPermission
		} else if missingDB(err) && kind != backend.ErrPermission {
			kind = backend.ErrConfig
		}
		msgs = append(msgs, err.Error())
	}
	if key != "" {
		op += fmt.Sprintf(" %q", key)
	}
	return fmt.Errorf("%w: redlock %s: %s: %d of %d masters needed, %d answered: %s",
		kind, b.url, op, b.quorum, len(b.masters), answered, strings.Join(msgs, "; "))
}

// errorsOf lists the errors among rs, each naming its master.
func errorsOf[T any](rs []reply[T]) []error {
	var errs []error
	for _, r := range rs {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.m.addr, r.err))
		}
	}
	return errs
}

// refused tells a server's refusal of who we are or what we asked (wrong
// password, unknown user, ACL) from an outage.
func refused(err error) bool {
	var answered goredis.Error
	if !errors.As(err, &answered) {
		return false
	}
	msg := answered.Error()
	for _, p := range []string{"WRONGPASS", "NOAUTH", "NOPERM"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// missingDB tells a master that has no database of the URL's number: a
// configuration error (exit 78) that no retry will mend.
func missingDB(err error) bool {
	var answered goredis.Error
	return errors.As(err, &answered) && strings.HasPrefix(answered.Error(), "ERR DB index is out of range")
}

// tally counts the replies that say yes, those that say no, and the
// errors.
func tally[T any](rs []reply[T], yes func(T) bool) (ayes, noes, errs int) {
	for _, r := range rs {
		switch {
		case r.err != nil:
			errs++
		case yes(r.v):
			ayes++
		default:
			noes++
		}
	}
	return ayes, noes, errs
}

// settled says whether replies to a yes/no question decide it: a majority
// said yes, or too many said no for a majority of yes. Errors decide
// nothing by themselves: the masters still to answer tell a refusal
// (held, lost) from an outage.
func (b *Backend) settled(ayes, noes, _ int) bool {
	return ayes >= b.quorum || noes > len(b.masters)-b.quorum
}
