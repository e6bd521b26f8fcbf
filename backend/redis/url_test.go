package redis

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

func TestParseURL(t *testing.T) {
	good := []struct {
		raw, addr, user, pass, prefix string
		db                            int
		dial, read, restart           time.Duration
		tls                           bool
	}{
		{"redis://", "localhost:6379", "", "", DefaultPrefix, 0, DefaultDialTimeout, DefaultReadTimeout, -1, false},
		{"redis://cache:7000/3?restart_wait=0", "cache:7000", "", "", DefaultPrefix, 3, DefaultDialTimeout, DefaultReadTimeout, 0, false},
		{"redis://:pw@[::1]/", "[::1]:6379", "", "pw", DefaultPrefix, 0, DefaultDialTimeout, DefaultReadTimeout, -1, false},
		{"rediss://app:s%40cret@h:6380/1?prefix=jobs:&dial_timeout=250ms&read_timeout=5s&restart_wait=5m", "h:6380", "app", "s@cret", "jobs:", 1, 250 * time.Millisecond, 5 * time.Second, 5 * time.Minute, true},
		{"redis://h?prefix=", "h:6379", "", "", "", 0, DefaultDialTimeout, DefaultReadTimeout, -1, false},
	}
	for _, c := range good {
		u, _ := url.Parse(c.raw)
		got, err := parseURL(u)
		if err != nil {
			t.Errorf("parseURL(%q): %v", c.raw, err)
			continue
		}
		opt := got.opt
		if opt.Addr != c.addr || opt.Username != c.user || opt.Password != c.pass || opt.DB != c.db || got.prefix != c.prefix ||
			opt.DialTimeout != c.dial || opt.ReadTimeout != c.read || got.restartWait != c.restart || (opt.TLSConfig != nil) != c.tls {
			t.Errorf("parseURL(%q) = addr %s user %q pass %q db %d prefix %q dial %v read %v restart_wait %v tls %v",
				c.raw, opt.Addr, opt.Username, opt.Password, opt.DB, got.prefix, opt.DialTimeout, opt.ReadTimeout, got.restartWait, opt.TLSConfig != nil)
		}
	}
	bad := map[string]string{
		"redis://h/x":                        "database number",
		"redis://h/0?db=1":                   "unknown parameter",
		"redis://h?dial_timeout=5":           "positive duration",
		"redis://h?restart_wait=-1s":         "restart_wait",
		"redis://h?restart_wait=ttl":         "restart_wait",
		"redis://h?prefix=a{b}":              "braces",
		"redis://h?ca_file=/etc/ssl/ca.pem":  "rediss://",
		"rediss://h?cert_file=/c.pem":        "together",
		"rediss://h?ca_file=/no/such/ca.pem": "ca_file",
		"redis:opaque":                       "redis://host:port/db",
	}
	for raw, want := range bad {
		u, _ := url.Parse(raw)
		if _, err := OpenURL(t.Context(), u); !errors.Is(err, backend.ErrInvalidURL) || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenURL(%q) = %v; want ErrInvalidURL saying %q", raw, err, want)
		}
	}
}

// ACL users log in with user:password; a wrong password, or none where one
// is needed, is a permission error (exit 77, not 69: retrying will not
// help), and never printed.
func TestACLUser(t *testing.T) {
	srv := redistest.Start(t, "--user", "alice", "on", ">s3cret", "~*", "&*", "+@all", "--user", "default", "off")
	b := open(t, "redis://alice:s3cret@"+srv.Addr()+"/0?"+redistest.NoRestartWait)
	l := backendtest.MustAcquire(t, b, "k", opts("h", time.Minute))
	l.Release(t.Context())
	for _, raw := range []string{"redis://alice:wrong-pw@" + srv.Addr(), "redis://" + srv.Addr(), "redis://bob:s3cret@" + srv.Addr()} {
		if _, err := tryOpen(raw); !errors.Is(err, backend.ErrPermission) || errors.Is(err, backend.ErrUnavailable) || strings.Contains(err.Error(), "wrong-pw") {
			t.Errorf("OpenURL(%s) = %v; want ErrPermission, without the password", backend.Redact(raw), err)
		}
	}
}

// An ACL that lets the user in but not at lockrun's keys, or not run
// scripts or a command they call, is a permission error on the first lock; a database the server
// does not have is a configuration error.
func TestACLRefusalsAreNotOutages(t *testing.T) {
	srv := redistest.Start(t,
		"--user", "keys", "on", ">pw", "~other:*", "&*", "+@all",
		"--user", "noscript", "on", ">pw", "~*", "&*", "+@all", "-@scripting",
		"--user", "notime", "on", ">pw", "~*", "&*", "+@all", "-time",
		"--user", "default", "on", "nopass", "~*", "&*", "+@all")
	for _, user := range []string{"keys", "noscript", "notime"} {
		b := open(t, "redis://"+user+":pw@"+srv.Addr()+"/0")
		_, err := b.Acquire(t.Context(), "k", opts("h", time.Minute))
		if !errors.Is(err, backend.ErrPermission) || errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("Acquire as %s = %v; want ErrPermission", user, err)
		}
		if _, err := b.Inspect(t.Context(), "k"); !errors.Is(err, backend.ErrPermission) {
			t.Errorf("Inspect as %s = %v; want ErrPermission", user, err)
		}
	}
	if _, err := tryOpen("redis://" + srv.Addr() + "/99"); !errors.Is(err, backend.ErrConfig) {
		t.Errorf("OpenURL(database 99) = %v; want ErrConfig", err)
	}
}
