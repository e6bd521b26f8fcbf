package redis

import (
	"net/url"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
)

// ClientOptions returns the go-redis options and the key prefix that
// OpenURL uses for u (redis:// or rediss://, the same parameters and
// checks), without connecting. It is for backends built on several Redis
// servers (redlock), so that every server is reached exactly as this
// backend reaches one. Errors describe the URL's mistake; they do not wrap
// backend.ErrInvalidURL.
func ClientOptions(u *url.URL) (*goredis.Options, string, error) {
	c, err := parseURL(u)
	return c.opt, c.prefix, err
}

// RestartWait reads u's restart_wait as OpenURL does: negative when the
// URL does not set it (each run's own wait, see RestartMS), 0 for none.
func RestartWait(u *url.URL) (time.Duration, error) { return restartWait(u.Query()) }

// RestartMS is the restart wait in ms of a run with options o, given the
// URL's wait (RestartWait's): the wait it sets, or when it sets none the
// longest a lost holder with the same options may still run or keep the
// key, its TTL or its min-hold.
func RestartMS(wait time.Duration, o backend.AcquireOptions) int64 {
	switch {
	case wait == 0:
		return 0
	case wait > 0:
		return millis(wait)
	}
	return millis(max(o.TTL, o.MinHold))
}
