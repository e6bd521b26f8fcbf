package redlock

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
	"github.com/lockrun/lockrun/internal/testcert"
)

func TestParseURL(t *testing.T) {
	u := mustParse(t, "redlocks://app:s%40cret@a:7000,b,c:7002/2?prefix=jobs:&read_timeout=5s")
	b, err := parse(u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var addrs []string
	for _, m := range b.masters {
		addrs = append(addrs, m.addr)
	}
	o := b.opt
	if strings.Join(addrs, " ") != "a:7000 b:6379 c:7002" || b.quorum != 2 || b.prefix != "jobs:" || o.Username != "app" ||
		o.Password != "s@cret" || o.DB != 2 || o.ReadTimeout != 5*time.Second || o.TLSConfig == nil || o.TLSConfig.ServerName != "a" {
		t.Errorf("parse = masters %v quorum %d prefix %q user %q db %d read %v tls %v", addrs, b.quorum, b.prefix, o.Username, o.DB, o.ReadTimeout, o.TLSConfig)
	}
	if b.masters[2].client.Options().TLSConfig.ServerName != "c" {
		t.Errorf("the third master's certificate is checked for %q, want c", b.masters[2].client.Options().TLSConfig.ServerName)
	}
	if !strings.Contains(b.url, "xxxxx") || strings.Contains(b.url, "cret") {
		t.Errorf("the URL in messages is %q, want the password redacted", b.url)
	}
	bad := map[string]string{
		"redlock://a,b":                       "at least 3",
		"redlock://a,b,a":                     "named twice",
		"redlock://a,,c":                      "empty host",
		"redlock://a,b,c/x":                   "redlock://host:port/0",
		"redlock://a,b,c?db=1":                "unknown parameter",
		"redlock://a,b,c?restart_wait=-1s":    "restart_wait=",
		"redlock://a,b,c?ca_file=/etc/ca.pem": "redlocks://",
		"redlock:opaque":                      "redlock://host1:6379",
		"redis://a,b,c":                       "not redlock",
	}
	for raw, want := range bad {
		if _, err := tryOpen(raw); !errors.Is(err, backend.ErrInvalidURL) || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenURL(%q) = %v; want ErrInvalidURL saying %q", raw, err, want)
		}
	}
}

// ACL users log in on every master; a wrong password is a permission
// error (exit 77), never printed, and fails at once (no retries).
func TestACLUser(t *testing.T) {
	servers := masters(t, 3, "--user", "alice", "on", ">s3cret", "~*", "&*", "+@all", "--user", "default", "off")
	hosts := hostsOf(servers) + "/0?" + redistest.NoRestartWait
	b := open(t, "redlock://alice:s3cret@"+hosts)
	l := backendtest.MustAcquire(t, b, "k", opts("h", time.Minute))
	l.Release(t.Context())
	for _, raw := range []string{"redlock://alice:wrong-pw@" + hosts, "redlock://" + hosts} {
		begin := time.Now()
		_, err := tryOpen(raw)
		if !errors.Is(err, backend.ErrPermission) || strings.Contains(err.Error(), "wrong-pw") || time.Since(begin) > time.Second {
			t.Errorf("OpenURL(%s) = %v after %v; want ErrPermission at once, without the password", backend.Redact(raw), err, time.Since(begin))
		}
	}
}

// A database the masters do not have is a configuration error (exit 78),
// not an outage (69) that cron would retry for ever.
func TestMissingDatabaseIsConfig(t *testing.T) {
	raw := "redlock://" + hostsOf(masters(t, 3)) + "/99"
	if _, err := tryOpen(raw); !errors.Is(err, backend.ErrConfig) || errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("OpenURL(%s) = %v; want ErrConfig, not ErrUnavailable", raw, err)
	}
}

// TLS: every master is verified against ca_file, and the client
// certificate is presented.
func TestTLS(t *testing.T) {
	certs := testcert.Write(t)
	var hosts []string
	for range 3 {
		port := strconv.Itoa(backendtest.FreePort(t))
		redistest.Start(t, "--tls-port", port, "--tls-cert-file", certs.Cert, "--tls-key-file", certs.Key,
			"--tls-ca-cert-file", certs.CA, "--tls-auth-clients", "yes")
		hosts = append(hosts, "127.0.0.1:"+port)
	}
	base := "redlocks://" + strings.Join(hosts, ",") + "/0"
	client := "cert_file=" + certs.Cert + "&key_file=" + certs.Key + "&" + redistest.NoRestartWait
	b := open(t, base+"?ca_file="+certs.CA+"&"+client)
	l := backendtest.MustAcquire(t, b, "k", opts("h", time.Minute))
	l.Release(t.Context())
	if _, err := tryOpen(base + "?" + client); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("masters the system's roots do not vouch for: OpenURL = %v, want ErrUnavailable", err)
	}
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// One server named twice under two names (127.0.0.1 and localhost) is
// not two masters: a "majority" of it is one server, and Redlock's
// tolerance of a lost master is gone. The masters say who they are
// (INFO's run_id); duplicates are a configuration error (exit 78).
func TestOneServerUnderTwoNamesIsRefused(t *testing.T) {
	s := masters(t, 2)
	_, port, _ := strings.Cut(s[0].Addr(), ":")
	raw := "redlock://" + s[0].Addr() + ",localhost:" + port + "," + s[1].Addr() + "/0"
	if _, err := tryOpen(raw); !errors.Is(err, backend.ErrConfig) {
		t.Errorf("OpenURL(%s) = %v; want ErrConfig", raw, err)
	}
}
