package redlock

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// healthCheck is how often an idle subscription is pinged to find a dead
// connection. Rare on purpose: a waiter whose wake-up is lost still wakes
// when the holder's lease can have expired.
const healthCheck = 30 * time.Second

// listener is a waiter's subscriptions to its own wake-up channel on the
// masters that answered: a release on any of them wakes it.
type listener struct {
	subs []*goredis.PubSub
	wake chan struct{} // one pending wake-up at most
}

// listen subscribes to r's waiter channel on every master and returns
// once a majority confirmed: from then on a release by any holder (which
// must reach a majority) reaches the waiter.
func (b *Backend) listen(ctx context.Context, r *request) (*listener, error) {
	cctx, cancel := context.WithTimeout(ctx, b.callTimeout(r.o.TTL))
	defer cancel()
	rs := fanout(cctx, b.masters, func(ctx context.Context, m *master) (*goredis.PubSub, error) {
		ps := m.client.Subscribe(ctx)
		err := ps.Subscribe(ctx, r.names.wake+r.waiter)
		if err == nil {
			_, err = ps.Receive(ctx) // the confirmation
		}
		if err != nil {
			_ = ps.Close()
			return nil, err
		}
		return ps, nil
	}, nil)
	l := &listener{wake: make(chan struct{}, 1)}
	for _, x := range rs {
		if x.err == nil {
			l.subs = append(l.subs, x.v)
			go l.forward(x.v.Channel(goredis.WithChannelHealthCheckInterval(healthCheck)))
		}
	}
	if len(l.subs) < b.quorum {
		l.close()
		return nil, b.noQuorum("subscribe", r.key, len(l.subs), errorsOf(rs))
	}
	return l, nil
}

// forward turns each message into a pending wake-up, until the
// subscription closes.
func (l *listener) forward(msgs <-chan *goredis.Message) {
	for range msgs {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// next blocks until the lock may be free: a release woke this waiter, or
// after d, when the holder's lease can have expired; or until ctx ends.
func (l *listener) next(ctx context.Context, key string, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.wake:
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("waiting for lock %q: %w", key, context.Cause(ctx))
	}
	return nil
}

// close ends the subscriptions. The waiter's queue entries are left
// behind: the next release on each master finds nobody listening and
// drops them.
func (l *listener) close() {
	for _, ps := range l.subs {
		_ = ps.Close()
	}
}
