package zookeeper

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/urlopt"
)

// Defaults for the URL's optional parts.
const (
	DefaultRoot = "/lockrun"
	DefaultPort = "2181"
	// DefaultDialTimeout is short so that an unreachable ensemble fails a
	// run within a second or two instead of holding up a cron job.
	DefaultDialTimeout = time.Second
	// DefaultRequestTimeout bounds each request when the caller's context
	// has no earlier deadline (renewals always have one).
	DefaultRequestTimeout = 5 * time.Second
	// DefaultTickTime is ZooKeeper's own default tickTime. A follower tells
	// the leader of a session's activity up to about half a tick late, so
	// a lease's local deadline counts from one tick before each renewal.
	DefaultTickTime = 2 * time.Second
)

// Environment variables read when the URL leaves the setting out; lockrun
// removes every LOCKRUN_* variable from the command's environment, so
// these never reach it.
const (
	EnvUser     = "LOCKRUN_ZK_USER"
	EnvPassword = "LOCKRUN_ZK_PASSWORD"
	EnvCACert   = "LOCKRUN_ZK_CACERT"
	EnvCert     = "LOCKRUN_ZK_CERT"
	EnvKey      = "LOCKRUN_ZK_KEY"
)

// Config says how to reach the ensemble and where lockrun's nodes live.
type Config struct {
	Servers        []string    // host:port of each member
	Root           string      // every node lockrun writes is below it
	User, Password string      // digest credentials; empty for none
	TLS            *tls.Config // nil for plain connections
	DialTimeout    time.Duration
	RequestTimeout time.Duration
	TickTime       time.Duration // the ensemble's tickTime, or an upper bound of it
}

// ParseURL reads zk://[user[:password]@]host[:port][,host[:port]...][/root]
// [?params] or zks://... (TLS). Parameters: dial_timeout, request_timeout,
// tick_time (Go durations) and, for zks, cacert, cert, key (PEM files).
// getenv supplies the LOCKRUN_ZK_* fallbacks.
func ParseURL(u *url.URL, getenv func(string) string) (Config, error) {
	c := Config{DialTimeout: DefaultDialTimeout, RequestTimeout: DefaultRequestTimeout, TickTime: DefaultTickTime}
	if u.Scheme != "zk" && u.Scheme != "zks" {
		return c, invalid("scheme %q: use zk:// or zks://", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return c, invalid("no host: use %s://host:2181[,host2:2181][/root]", u.Scheme)
	}
	var err error
	if c.Servers, err = servers(u.Host); err != nil {
		return c, err
	}
	if c.Root, err = root(u.Path); err != nil {
		return c, err
	}
	if err := c.credentials(u, getenv); err != nil {
		return c, err
	}
	if err := c.options(u.Query()); err != nil {
		return c, err
	}
	q := u.Query()
	env := urlopt.TLSEnv{CACert: EnvCACert, Cert: EnvCert, Key: EnvKey}
	if c.TLS, err = urlopt.QueryTLS(q, u.Scheme == "zks", "zks", env, getenv); err != nil {
		return c, invalid("%v", err)
	}
	return c, nil
}

// options reads the query parameters other than the TLS files.
func (c *Config) options(q url.Values) error {
	if err := urlopt.Known(q, "dial_timeout", "request_timeout", "tick_time", "cacert", "cert", "key"); err != nil {
		return invalid("%v", err)
	}
	var err error
	if c.DialTimeout, err = urlopt.Duration(q, "dial_timeout", c.DialTimeout); err != nil {
		return invalid("%v", err)
	}
	if c.RequestTimeout, err = urlopt.Duration(q, "request_timeout", c.RequestTimeout); err != nil {
		return invalid("%v", err)
	}
	if c.TickTime, err = urlopt.Duration(q, "tick_time", c.TickTime); err != nil {
		return invalid("%v", err)
	}
	return nil
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", backend.ErrInvalidURL, fmt.Sprintf(format, a...))
}

// servers splits "h1:2181,h2" into host:port pairs, adding the default
// port where it is missing.
func servers(hosts string) ([]string, error) {
	out, err := urlopt.Hosts(hosts, DefaultPort)
	if err != nil {
		return nil, invalid("%v", err)
	}
	for _, h := range out {
		if err := checkServer(h); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// root turns the URL path into the node below which lockrun works: no path
// means DefaultRoot; a trailing slash is dropped.
func root(path string) (string, error) {
	path = strings.TrimSuffix(path, "/")
	if path == "" {
		return DefaultRoot, nil
	}
	if i := strings.IndexFunc(path, badPathRune); i >= 0 || !utf8.ValidString(path) {
		return "", invalid("root %q: a ZooKeeper path may not hold control characters or invalid UTF-8", path)
	}
	for _, seg := range strings.Split(path[1:], "/") {
		if seg == "" || seg == "." || seg == ".." || seg == "zookeeper" && !strings.Contains(path[1:], "/") {
			return "", invalid("root %q: use a path such as /lockrun or /team/locks (no empty, . or .. segment, not /zookeeper)", path)
		}
	}
	return path, nil
}

// checkServer refuses a host:port that no dial could reach: an empty host
// or a port outside 1-65535 is a typo, not an outage (exit 64, not 69).
func checkServer(hostPort string) error {
	host, port, _ := net.SplitHostPort(hostPort)
	if n, err := strconv.Atoi(port); host == "" || err != nil || n < 1 || n > 65535 {
		return invalid("server %q: use host:port with a port from 1 to 65535", hostPort)
	}
	return nil
}

// badPathRune is a character ZooKeeper refuses in a path (its PathUtils):
// C0 and C1 controls, DEL, surrogates, private use and U+FFF0-U+FFFF.
func badPathRune(r rune) bool {
	return unicode.IsControl(r) || r >= 0xd800 && r <= 0xf8ff || r >= 0xfff0 && r <= 0xffff
}

// credentials takes the digest user and password from the URL, else from
// LOCKRUN_ZK_USER; the password possibly from LOCKRUN_ZK_PASSWORD. Digest
// auth needs both or neither.
func (c *Config) credentials(u *url.URL, getenv func(string) string) error {
	if u.User != nil {
		c.User = u.User.Username()
		c.Password, _ = u.User.Password()
	} else {
		c.User = getenv(EnvUser)
	}
	if c.User == "" && c.Password == "" {
		return nil
	}
	if c.Password == "" {
		c.Password = getenv(EnvPassword)
	}
	if c.User == "" || c.Password == "" || strings.Contains(c.User, ":") {
		return invalid("digest auth needs a user (without ':') and a password: write %s://USER:PASSWORD@host, or set %s and %s", u.Scheme, EnvUser, EnvPassword)
	}
	return nil
}
