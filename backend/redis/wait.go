package redis

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// healthCheck is how often an idle subscription is pinged to find a dead
// connection. Rare on purpose: a waiter whose wake-up is lost still wakes
// when the holder's lease can have expired.
const healthCheck = 30 * time.Second

// listener is a waiter's subscription to its own wake-up channel.
type listener struct {
	id     string
	pubsub *goredis.PubSub
	msgs   <-chan *goredis.Message
}

// listen subscribes to a new waiter's channel and returns once the server
// has confirmed it: from then on no wake-up sent to this waiter is missed.
func (b *Backend) listen(ctx context.Context, r request) (*listener, error) {
	id := rand.Text()
	ps := b.client.Subscribe(ctx)
	cctx, cancel := context.WithTimeout(ctx, b.opt.ReadTimeout)
	defer cancel()
	err := ps.Subscribe(cctx, r.names.wake+id)
	if err == nil {
		_, err = ps.Receive(cctx) // the confirmation
	}
	if err != nil {
		_ = ps.Close()
		return nil, b.unavailable("subscribe", r.key, err)
	}
	return &listener{id: id, pubsub: ps, msgs: ps.Channel(goredis.WithChannelHealthCheckInterval(healthCheck))}, nil
}

// next blocks until the lock may be free: a release woke this waiter, or
// after d, when the holder's lease can have expired; or until ctx ends.
func (l *listener) next(ctx context.Context, key string, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.msgs:
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("waiting for lock %q: %w", key, context.Cause(ctx))
	}
	return nil
}

// close ends the subscription. The waiter's queue entry is left behind: the
// next release finds nobody listening on its channel and drops it.
func (l *listener) close() { _ = l.pubsub.Close() }
