package etcd

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/urlopt"
)

// Defaults for the URL's optional parts.
const (
	DefaultPrefix = "/lockrun/"
	DefaultPort   = "2379"
	// DefaultDialTimeout is short so that an unreachable etcd fails a run
	// within a second or two instead of holding up a cron job.
	DefaultDialTimeout = time.Second
	// DefaultRequestTimeout bounds each request when the caller's context
	// has no earlier deadline (renewals always have one).
	DefaultRequestTimeout = 5 * time.Second
)

// Environment variables read when the URL leaves the setting out; lockrun
// removes every LOCKRUN_* variable from the command's environment, so
// these never reach it.
const (
	EnvCACert   = "LOCKRUN_ETCD_CACERT"
	EnvCert     = "LOCKRUN_ETCD_CERT"
	EnvKey      = "LOCKRUN_ETCD_KEY"
	EnvPassword = "LOCKRUN_ETCD_PASSWORD"
)

// Config says how to reach etcd and where lockrun's keys live.
type Config struct {
	Endpoints      []string    // host:port of each member to try
	TLS            *tls.Config // nil for plain connections
	Username       string      // etcd user, when auth is enabled
	Password       string
	Prefix         string // every key lockrun writes starts with it
	DialTimeout    time.Duration
	RequestTimeout time.Duration
}

// ParseURL reads etcd://host[:port][,host[:port]...][/prefix/][?params] or
// etcds://... (TLS). Parameters: dial_timeout, request_timeout (Go
// durations) and, for etcds, cacert, cert, key (PEM files). getenv supplies
// the LOCKRUN_ETCD_* fallbacks.
func ParseURL(u *url.URL, getenv func(string) string) (Config, error) {
	c := Config{DialTimeout: DefaultDialTimeout, RequestTimeout: DefaultRequestTimeout}
	if u.Scheme != "etcd" && u.Scheme != "etcds" {
		return c, invalid("scheme %q: use etcd:// or etcds://", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return c, invalid("no host: use %s://host:2379[,host2:2379]", u.Scheme)
	}
	var err error
	if c.Endpoints, err = endpoints(u.Host); err != nil {
		return c, err
	}
	if c.Prefix, err = prefix(u.Path); err != nil {
		return c, err
	}
	if err := c.credentials(u, getenv); err != nil {
		return c, err
	}
	q := u.Query()
	if err := urlopt.Known(q, "dial_timeout", "request_timeout", "cacert", "cert", "key"); err != nil {
		return c, invalid("%v", err)
	}
	if c.DialTimeout, err = urlopt.Duration(q, "dial_timeout", c.DialTimeout); err != nil {
		return c, invalid("%v", err)
	}
	if c.RequestTimeout, err = urlopt.Duration(q, "request_timeout", c.RequestTimeout); err != nil {
		return c, invalid("%v", err)
	}
	env := urlopt.TLSEnv{CACert: EnvCACert, Cert: EnvCert, Key: EnvKey}
	if c.TLS, err = urlopt.QueryTLS(q, u.Scheme == "etcds", "etcds", env, getenv); err != nil {
		return c, invalid("%v", err)
	}
	return c, nil
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", backend.ErrInvalidURL, fmt.Sprintf(format, a...))
}

// endpoints splits "h1:2379,h2" into host:port pairs, adding the default
// port where it is missing.
func endpoints(hosts string) ([]string, error) {
	eps, err := urlopt.Hosts(hosts, DefaultPort)
	if err != nil {
		return nil, invalid("%v", err)
	}
	return eps, nil
}

// prefix turns the URL path into a key prefix ending in "/"; no path means
// DefaultPrefix.
func prefix(path string) (string, error) {
	if path == "" || path == "/" {
		return DefaultPrefix, nil
	}
	if strings.Contains(path, "//") {
		return "", invalid("key prefix %q has an empty segment: write /a/b/", path)
	}
	return strings.TrimSuffix(path, "/") + "/", nil
}

// credentials takes the user and password from the URL, the password
// possibly from LOCKRUN_ETCD_PASSWORD; etcd needs both or neither.
func (c *Config) credentials(u *url.URL, getenv func(string) string) error {
	if u.User == nil {
		return nil
	}
	c.Username = u.User.Username()
	pw, ok := u.User.Password()
	if !ok {
		pw = getenv(EnvPassword)
	}
	c.Password = pw
	if c.Username == "" || c.Password == "" {
		return invalid("etcd auth needs a user and a password: write %s://USER:PASSWORD@host, or set %s", u.Scheme, EnvPassword)
	}
	return nil
}
