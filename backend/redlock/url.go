package redlock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/backend/redis"
)

// OpenURL opens redlock://[user:password@]host[:port],host[:port],...[/db][?param=value&...],
// or redlocks://... for TLS: at least MinMasters independent Redis
// masters, each reached as package redis reaches redis:// (or rediss://)
// with the same user, database and parameters: prefix, dial_timeout,
// read_timeout, restart_wait (a master up for less than it grants no new
// lock), and for TLS ca_file, cert_file, key_file (every server's
// certificate is verified against its own host name). Bad URLs wrap
// backend.ErrInvalidURL. OpenURL connects to every master at once: when
// fewer than a majority answer it fails, wrapping backend.ErrUnavailable,
// or backend.ErrPermission when a master refuses the credentials.
func OpenURL(ctx context.Context, u *url.URL) (*Backend, error) {
	b, err := parse(u)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", backend.ErrInvalidURL, err)
	}
	if err := b.probe(ctx); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// parse builds a Backend, not yet connected, from the URL.
func parse(u *url.URL) (*Backend, error) {
	if u.Scheme != "redlock" && u.Scheme != "redlocks" {
		return nil, fmt.Errorf("scheme %q is not redlock or redlocks", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, fmt.Errorf("use %s://host1:6379,host2:6379,host3:6379/db", u.Scheme) // the rest may hold a password
	}
	hosts := strings.Split(u.Host, ",")
	if len(hosts) < MinMasters {
		return nil, fmt.Errorf("%d masters named; Redlock needs at least %d independent ones (for one server use redis://)", len(hosts), MinMasters)
	}
	wait, err := redis.RestartWait(u)
	if err != nil {
		return nil, err
	}
	b := &Backend{url: backend.Redact(u.String()), quorum: len(hosts)/2 + 1, scripts: newScripts(), restartWait: wait}
	var opts []*goredis.Options
	seen := make(map[string]bool)
	for _, h := range hosts {
		opt, prefix, err := masterOptions(u, h)
		if err != nil {
			return nil, err
		}
		if seen[opt.Addr] {
			return nil, fmt.Errorf("master %s is named twice: a majority must be of distinct servers", opt.Addr)
		}
		seen[opt.Addr] = true
		b.prefix = prefix
		opts = append(opts, opt)
	}
	b.opt = opts[0]
	for _, opt := range opts {
		b.masters = append(b.masters, &master{client: goredis.NewClient(opt), addr: opt.Addr})
	}
	return b, nil
}

// masterOptions are the client options of one master: the URL as
// redis:// (or rediss://) with that host alone.
func masterOptions(u *url.URL, host string) (*goredis.Options, string, error) {
	if host == "" || strings.HasPrefix(host, ":") {
		return nil, "", fmt.Errorf("empty host in %q: use host:port between the commas", u.Host)
	}
	one := *u
	one.Scheme, one.Host = "redis", host
	if u.Scheme == "redlocks" {
		one.Scheme = "rediss"
	}
	opt, prefix, err := redis.ClientOptions(&one)
	if err != nil {
		// The message's fix, in the user's scheme.
		return nil, "", errors.New(strings.NewReplacer("rediss://", "redlocks://", "redis://", "redlock://").Replace(err.Error()))
	}
	return opt, prefix, nil
}
