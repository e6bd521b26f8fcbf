package etcd

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/lockrun/lockrun/backend"
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
	for name := range q {
		switch name {
		case "dial_timeout", "request_timeout", "cacert", "cert", "key":
		default:
			return c, invalid("unknown parameter %q: use dial_timeout, request_timeout, cacert, cert or key", name)
		}
	}
	if c.DialTimeout, err = duration(q, "dial_timeout", c.DialTimeout); err != nil {
		return c, err
	}
	if c.RequestTimeout, err = duration(q, "request_timeout", c.RequestTimeout); err != nil {
		return c, err
	}
	if u.Scheme == "etcd" {
		if q.Has("cacert") || q.Has("cert") || q.Has("key") {
			return c, invalid("cacert, cert and key need TLS: use etcds://")
		}
		return c, nil
	}
	c.TLS, err = tlsConfig(param(q, "cacert", getenv(EnvCACert)), param(q, "cert", getenv(EnvCert)), param(q, "key", getenv(EnvKey)))
	return c, err
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", backend.ErrInvalidURL, fmt.Sprintf(format, a...))
}

// endpoints splits "h1:2379,h2" into host:port pairs, adding the default
// port where it is missing.
func endpoints(hosts string) ([]string, error) {
	var eps []string
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return nil, invalid("empty host in %q: separate hosts with single commas", hosts)
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), DefaultPort)
		}
		eps = append(eps, h)
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

func param(q url.Values, name, fallback string) string {
	if q.Has(name) {
		return q.Get(name)
	}
	return fallback
}

func duration(q url.Values, name string, def time.Duration) (time.Duration, error) {
	if !q.Has(name) {
		return def, nil
	}
	d, err := time.ParseDuration(q.Get(name))
	if err != nil || d <= 0 {
		return 0, invalid("%s=%q: use a positive duration such as %v", name, q.Get(name), def)
	}
	return d, nil
}

// tlsConfig trusts the CA in cacert (the system's roots when empty) and
// presents the client certificate in cert and key when given.
func tlsConfig(cacert, cert, key string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if cacert != "" {
		pem, err := os.ReadFile(cacert)
		if err != nil {
			return nil, invalid("cacert: %v", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, invalid("cacert %s holds no PEM certificate", cacert)
		}
	}
	if (cert == "") != (key == "") {
		return nil, invalid("a client certificate needs both cert and key (or %s and %s)", EnvCert, EnvKey)
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, invalid("client certificate: %v", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
