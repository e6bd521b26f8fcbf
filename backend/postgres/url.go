package postgres

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/backend"
)

// Query parameters that lockrun reads and removes before pgx sees the URL;
// every other parameter is pgx's (libpq's names: sslmode, sslrootcert,
// connect_timeout, passfile, ...).
const (
	// ParamTable names the lease table, as "table" (in schema public) or
	// "schema.table"; public.lockrun_locks by default.
	ParamTable = "lockrun_table"
	// ParamCreateTable set to false forbids creating the table on first
	// use; create it beforehand with `lockrun init`.
	ParamCreateTable = "lockrun_create_table"
)

// The lease table when ParamTable is not given, public.lockrun_locks. It
// is schema-qualified so that every lockrun finds the same table whatever
// its search_path; a table named without a schema is in defaultSchema too.
const (
	defaultSchema = "public"
	defaultTable  = "lockrun_locks"
)

// Connection defaults, used when the URL does not say otherwise.
const (
	// defaultConnectTimeout keeps a dead or unreachable server from holding
	// lockrun at start: the runner retries three times, then exits 69.
	defaultConnectTimeout = 2 * time.Second
	// The kernel gives up on a half-open connection within about 20 s
	// (keepalive probes when idle, TCP_USER_TIMEOUT when data is unacked).
	// Every call also carries its own deadline; these only keep a
	// forgotten socket from lingering for the kernel's 15-minute default.
	keepAliveIdle     = 5 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	tcpUserTimeout    = 20 * time.Second
)

// settings is what OpenURL makes of a URL.
type settings struct {
	conn   *pgx.ConnConfig
	table  pgx.Identifier
	create bool
}

func parseURL(u *url.URL) (settings, error) {
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return settings{}, fmt.Errorf("%w: scheme %q is not postgres or postgresql", backend.ErrInvalidURL, u.Scheme)
	}
	s := settings{table: pgx.Identifier{defaultSchema, defaultTable}, create: true}
	rest := *u
	q, pgxQuery, err := splitQuery(u.RawQuery)
	if err != nil {
		return settings{}, fmt.Errorf("%w: %v", backend.ErrInvalidURL, err)
	}
	for name, v := range q {
		switch name {
		case ParamTable:
			s.table, err = parseTable(v)
		case ParamCreateTable:
			s.create, err = strconv.ParseBool(v)
		default:
			err = fmt.Errorf("unknown parameter: use %s or %s", ParamTable, ParamCreateTable)
		}
		if err != nil {
			return settings{}, fmt.Errorf("%w: %s: %v", backend.ErrInvalidURL, name, err)
		}
	}
	rest.RawQuery = pgxQuery
	cfg, err := pgx.ParseConfig(rest.String())
	if err != nil {
		return settings{}, fmt.Errorf("%w: %v", backend.ErrInvalidURL, err)
	}
	configure(cfg, rest.Query())
	s.conn = cfg
	return s, nil
}

// splitQuery takes lockrun's parameters (the last of each name wins) out
// of a URL's raw query and returns the rest for pgx, which reads a query
// as libpq does: percent-decoded, a plus sign as itself, one '=' a pair.
// So the rest is not decoded and encoded again, which made every %20 a
// plus; only what libpq would refuse and url.Values accepted is written
// as url.Values wrote it: an '=' inside a value (base64 padding,
// options=-cname=value) as %3D, and a name without a value as name=.
// lockrun's own values are decoded as url.Values decodes, a plus as a
// space, as before: two lockruns on one URL must find one table.
func splitQuery(raw string) (lockrun map[string]string, rest string, err error) {
	lockrun = map[string]string{}
	var kept []string
	for _, part := range strings.Split(raw, "&") {
		rawName, value, _ := strings.Cut(part, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil {
			return nil, "", err
		}
		if !strings.HasPrefix(name, "lockrun_") {
			if part != "" {
				kept = append(kept, rawName+"="+strings.ReplaceAll(value, "=", "%3D"))
			}
			continue
		}
		if lockrun[name], err = url.QueryUnescape(value); err != nil {
			return nil, "", fmt.Errorf("%s: %w", name, err)
		}
	}
	return lockrun, strings.Join(kept, "&"), nil
}

// parseTable reads "table" or "schema.table". Any name is allowed, since it
// is always quoted; a dot inside a name cannot be written.
func parseTable(v string) (pgx.Identifier, error) {
	parts := strings.Split(v, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%q has %d dots: write table or schema.table", v, len(parts)-1)
	}
	for _, p := range parts {
		if p == "" || len(p) > 63 {
			return nil, fmt.Errorf("%q: names must be 1 to 63 bytes: write table or schema.table", v)
		}
	}
	if len(parts) == 1 {
		return pgx.Identifier{defaultSchema, parts[0]}, nil
	}
	return pgx.Identifier(parts), nil
}

// configure sets lockrun's defaults where the URL gave none.
func configure(cfg *pgx.ConnConfig, q url.Values) {
	if !q.Has("default_query_exec_mode") {
		// One round trip per statement and no server-side prepared
		// statements, which a transaction-pooling PgBouncer would lose.
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	d := &net.Dialer{
		Timeout: cfg.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
		},
		Control: setUserTimeout,
	}
	cfg.DialFunc = d.DialContext
}

// setUserTimeout bounds how long sent data may stay unacknowledged before
// the kernel drops the connection.
func setUserTimeout(network, _ string, rc syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(tcpUserTimeout.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
