package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockrun/lockrun/backend"
)

// errRefused marks a probe that a master refused (credentials, ACL): final
// at once, since retrying will not help.
var errRefused = errors.New("refused")

// probe pings every master at once, with backend.Probe's retries, until a
// majority answers: a master restarting just as a cron job starts does
// not fail it, and a set that stays without a majority fails here, as one
// error. One try may take the dial timeout plus the read timeout.
func (b *Backend) probe(ctx context.Context) error {
	var last error
	err := backend.Probe(ctx, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, b.opt.DialTimeout+b.opt.ReadTimeout)
		defer cancel()
		rs := fanout(ctx, b.masters, func(ctx context.Context, m *master) (struct{}, error) {
			return struct{}{}, m.client.Ping(ctx).Err()
		}, func(rs []reply[struct{}]) bool {
			n := answered(rs)
			return b.settled(n, 0, len(rs)-n)
		})
		if n := answered(rs); n < b.quorum {
			last = b.noQuorum("connect", "", n, errorsOf(rs))
			if errors.Is(last, backend.ErrPermission) {
				return errRefused
			}
			return last
		}
		return nil
	}, func(err error) bool { return errors.Is(err, errRefused) })
	if err != nil && last != nil {
		return fmt.Errorf("connecting: %w", last)
	}
	return err
}
