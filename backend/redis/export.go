package redis

import (
	"net/url"

	goredis "github.com/redis/go-redis/v9"
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
