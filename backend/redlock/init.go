package redlock

import (
	"context"
	"errors"

	"github.com/lockrun/lockrun/backend/redis"
)

// Init loads the fence functions on every master, as redis's Init does on
// its one server (see redis.LoadFence), so that a fenced write works on
// any of them. It asks them all at once and fails if any failed, naming
// each that did.
func (b *Backend) Init(ctx context.Context) error {
	load := func(ctx context.Context, m *master) (struct{}, error) {
		return struct{}{}, redis.LoadFence(ctx, m.client, m.addr)
	}
	var errs []error
	for _, r := range fanout(ctx, b.masters, load, nil) {
		errs = append(errs, r.err)
	}
	return errors.Join(errs...)
}
