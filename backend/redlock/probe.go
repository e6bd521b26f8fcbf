package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
)

// errRefused marks a probe that a master refused (credentials, ACL, no
// such database): final at once, since retrying will not help.
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
		// Lingering for the last masters lets sameServer see them all.
		rs := fanoutLinger(ctx, b.masters, whoIs, func(rs []reply[string]) bool {
			n := answered(rs)
			return b.settled(n, 0, len(rs)-n)
		}, maxLinger)
		if n := answered(rs); n < b.quorum {
			last = b.noQuorum("connect", "", n, errorsOf(rs))
			if errors.Is(last, backend.ErrPermission) || errors.Is(last, backend.ErrConfig) {
				return errRefused
			}
			return last
		}
		if last = sameServer(rs); last != nil {
			return errRefused
		}
		return nil
	}, func(err error) bool { return errors.Is(err, errRefused) })
	if err != nil && last != nil {
		return fmt.Errorf("connecting: %w", last)
	}
	return err
}

// whoIs asks m for its run_id (INFO server), which tells two names of one
// server apart from two servers; a server that refuses INFO (a proxy, a
// renamed command) is only pinged, and goes unchecked.
func whoIs(ctx context.Context, m *master) (string, error) {
	info, err := m.client.Info(ctx, "server").Result()
	var answered goredis.Error
	if err != nil && errors.As(err, &answered) && !refused(err) && !missingDB(err) {
		return "", m.client.Ping(ctx).Err()
	}
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(info, "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok {
			return id, nil
		}
	}
	return "", nil
}

// sameServer is a backend.ErrConfig error when two masters that answered
// are one server under two names: a majority of them would not be one of
// independent servers.
func sameServer(rs []reply[string]) error {
	seen := map[string]string{}
	for _, r := range rs {
		if r.err != nil || r.v == "" {
			continue
		}
		if other, ok := seen[r.v]; ok {
			return fmt.Errorf("%w: masters %s and %s are the same Redis server (run_id %s): name each master once", backend.ErrConfig, other, r.m.addr, r.v)
		}
		seen[r.v] = r.m.addr
	}
	return nil
}
