package redis

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/urlopt"
)

// Defaults for the URL's query parameters. The dial timeout is short so
// that a server that is down or unreachable fails a run within about a
// second (OpenURL's probe tries three times, then lockrun exits 69); the read timeout
// bounds calls made without a deadline of their own.
const (
	DefaultDialTimeout = time.Second
	DefaultReadTimeout = 2 * time.Second
)

// EnvAuth is the environment variable that redis-cli reads its password
// from; lockrun reads it too when the URL has no password, and does not
// pass it on to the command.
const EnvAuth = "REDISCLI_AUTH"

// OpenURL opens redis://[user:password@]host[:port][/db][?param=value&...]
// or rediss://... for TLS. Parameters: prefix (of every key; default
// "lockrun:"), dial_timeout (default 1s), read_timeout (default 2s; also
// the write timeout), password_file (a file whose first line is the
// password, instead of one in the URL), and for rediss ca_file (PEM
// certificates to trust instead of the system's), cert_file and key_file
// (a client certificate). With neither a password in the URL nor
// password_file, the password is $REDISCLI_AUTH when set, as for redis-cli:
// a crontab then need not hold it, nor does it show in ps.
// The server's certificate is always verified. Bad URLs wrap
// backend.ErrInvalidURL. OpenURL connects (see probe): a server that cannot
// be reached or refuses the credentials fails here, wrapping
// backend.ErrUnavailable. go-redis logs dial failures to stderr unless the
// program calls DisableClientLogs first.
func OpenURL(ctx context.Context, u *url.URL) (*Backend, error) {
	c, err := parseURL(u)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", backend.ErrInvalidURL, err)
	}
	b := &Backend{
		client:      goredis.NewClient(c.opt),
		opt:         c.opt,
		url:         backend.Redact(u.String()),
		prefix:      c.prefix,
		restartWait: c.restartWait,
		scripts:     newScripts(),
	}
	if err := b.probe(ctx); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// config is what a URL says: the client's options, the key prefix and
// the restart wait (restart_wait; negative: the run's TTL).
type config struct {
	opt         *goredis.Options
	prefix      string
	restartWait time.Duration
}

// parseURL turns the URL into a config.
func parseURL(u *url.URL) (config, error) {
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return config{}, fmt.Errorf("scheme %q is not redis or rediss", u.Scheme)
	}
	if u.Opaque != "" {
		return config{}, fmt.Errorf("use %s://host:port/db, not an opaque %s: URL", u.Scheme, u.Scheme) // the rest may hold a password
	}
	q := u.Query()
	if err := urlopt.Known(q, "prefix", "dial_timeout", "read_timeout", "password_file", "ca_file", "cert_file", "key_file", "restart_wait"); err != nil {
		return config{}, err
	}
	if backend.MisplacedUserinfo(u) { // the path would hold the password
		return config{}, fmt.Errorf("'@' after the host: percent-encode '/', '?', '#' and '@' in a password (%%2F, %%3F, %%23, %%40), or use password_file or $%s", EnvAuth)
	}
	opt := &goredis.Options{
		Addr: hostPort(u),
		// Every call is bounded by its context's deadline, and nothing is
		// retried behind the caller's back: a renewal must return by the
		// heartbeat's deadline, and a lost reply to a successful acquire is
		// recognized by acquire.lua when the runner tries again.
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
		// No CLIENT SETINFO and no maintenance-notification handshake: fewer
		// round trips before the first lock request.
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	c := config{opt: opt}
	var err error
	if opt.Username, opt.Password, err = credentials(u, q); err != nil {
		return config{}, err
	}
	if opt.DB, err = database(u.Path); err != nil {
		return config{}, err
	}
	if opt.DialTimeout, err = urlopt.Duration(q, "dial_timeout", DefaultDialTimeout); err != nil {
		return config{}, err
	}
	if opt.ReadTimeout, err = urlopt.Duration(q, "read_timeout", DefaultReadTimeout); err != nil {
		return config{}, err
	}
	opt.WriteTimeout = opt.ReadTimeout
	if opt.TLSConfig, err = tlsConfig(u, q); err != nil {
		return config{}, err
	}
	if c.restartWait, err = restartWait(q); err != nil {
		return config{}, err
	}
	c.prefix, err = keyPrefix(q)
	return c, err
}

// restartWait reads restart_wait: how long after the server's start a free
// lock stays closed (see lua/lib.lua's restart_left). Absent, it is the
// run's TTL (negative here); 0 turns the check off, for a server that
// loses no write (appendfsync always) or for tests of other things.
func restartWait(q url.Values) (time.Duration, error) {
	s := q.Get("restart_wait")
	if s == "" {
		return -1, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("restart_wait=%q: use a duration such as restart_wait=5m (at least the longest --ttl of a run on this server), or 0 to turn the check off", s)
	}
	return d, nil
}

func hostPort(u *url.URL) string {
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "localhost"
	}
	if port == "" {
		port = "6379"
	}
	return net.JoinHostPort(host, port)
}

// database reads the database number from the URL's path: "", "/" or "/N".
func database(path string) (int, error) {
	s := strings.TrimPrefix(path, "/")
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("path %q is not a database number: use redis://host:port/0", path)
	}
	return n, nil
}

// keyPrefix refuses braces: they would move the hash tag, and with it the
// cluster slot, away from the key.
func keyPrefix(q url.Values) (string, error) {
	if !q.Has("prefix") {
		return DefaultPrefix, nil
	}
	p := q.Get("prefix")
	if strings.ContainsAny(p, "{} \t\r\n") || len(p) > 100 {
		return "", fmt.Errorf("prefix=%q: use at most 100 characters without braces or blanks (e.g. prefix=myapp:locks:)", p)
	}
	return p, nil
}

// tlsConfig is nil for redis://, and for rediss:// a configuration that
// verifies the server (named in the URL) against the system's roots or
// ca_file, and presents cert_file and key_file when given.
func tlsConfig(u *url.URL, q url.Values) (*tls.Config, error) {
	ca, cert, key := q.Get("ca_file"), q.Get("cert_file"), q.Get("key_file")
	if u.Scheme == "redis" {
		if ca != "" || cert != "" || key != "" {
			return nil, fmt.Errorf("ca_file, cert_file and key_file need TLS: use rediss://")
		}
		return nil, nil
	}
	c, err := urlopt.TLS(urlopt.File{Name: "ca_file", Path: ca}, urlopt.File{Name: "cert_file", Path: cert}, urlopt.File{Name: "key_file", Path: key})
	if err != nil {
		return nil, err
	}
	c.ServerName = u.Hostname()
	return c, nil
}

// credentials are the user and password: the password from the URL, else
// from password_file, else from $REDISCLI_AUTH.
func credentials(u *url.URL, q url.Values) (user, password string, err error) {
	inURL := false
	if u.User != nil {
		user = u.User.Username()
		password, inURL = u.User.Password()
	}
	switch {
	case q.Has("password_file") && inURL:
		return "", "", fmt.Errorf("a password in the URL and password_file: give one of them")
	case q.Has("password_file"):
		password, err = readPassword(q.Get("password_file"))
	case !inURL:
		password = os.Getenv(EnvAuth)
	}
	return user, password, err
}

// readPassword reads the first line of a password file. Its content is
// never shown: not even a hint of it goes into the error.
func readPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("password_file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", fmt.Errorf("password_file %s: the first line is empty", path)
	}
	return line, nil
}
