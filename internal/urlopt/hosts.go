package urlopt

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Hosts splits a URL's host list such as "h1:2379,h2" into host:port
// pairs, adding defaultPort where a host has none. An empty entry (a
// doubled or trailing comma) is an error.
func Hosts(hosts, defaultPort string) ([]string, error) {
	var out []string
	for _, h := range strings.Split(hosts, ",") {
		if h == "" {
			return nil, fmt.Errorf("empty host in %q: separate hosts with single commas", hosts)
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), defaultPort)
		}
		out = append(out, h)
	}
	return out, nil
}

// EnvFile is the PEM file in q's parameter name, else the one in the
// environment variable env (read with getenv); its Name tells the user
// where it came from, or both places when neither gave it.
func EnvFile(q url.Values, name, env string, getenv func(string) string) File {
	if q.Has(name) {
		return File{Name: name, Path: q.Get(name)}
	}
	if path := getenv(env); path != "" {
		return File{Name: env, Path: path}
	}
	return File{Name: name + " (or " + env + ")"}
}

// TLSEnv names the environment variables that stand in for the cacert,
// cert and key parameters when the URL leaves them out.
type TLSEnv struct{ CACert, Cert, Key string }

// QueryTLS reads the cacert, cert and key parameters of q (falling back to
// env through getenv) into a client configuration, as TLS does. When
// secure is false (a plain scheme) it returns nil, and an error naming
// tlsScheme if q gives any of the three: they would be silently ignored.
func QueryTLS(q url.Values, secure bool, tlsScheme string, env TLSEnv, getenv func(string) string) (*tls.Config, error) {
	if !secure {
		if q.Has("cacert") || q.Has("cert") || q.Has("key") {
			return nil, fmt.Errorf("cacert, cert and key need TLS: use %s://", tlsScheme)
		}
		return nil, nil
	}
	return TLS(EnvFile(q, "cacert", env.CACert, getenv), EnvFile(q, "cert", env.Cert, getenv), EnvFile(q, "key", env.Key, getenv))
}
