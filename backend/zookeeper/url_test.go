package zookeeper

import (
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/testcert"
)

func parse(t *testing.T, raw string, env map[string]string) (Config, error) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return ParseURL(u, func(k string) string { return env[k] })
}

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		env  map[string]string
		want Config
	}{
		{raw: "zk://a", want: Config{Servers: []string{"a:2181"}, Root: "/lockrun"}},
		{raw: "zk://a:1,b:2/team/locks/", want: Config{Servers: []string{"a:1", "b:2"}, Root: "/team/locks"}},
		{raw: "zk://[::1]/x?dial_timeout=250ms&request_timeout=2s&tick_time=500ms", want: Config{Servers: []string{"[::1]:2181"}, Root: "/x", DialTimeout: 250 * time.Millisecond, RequestTimeout: 2 * time.Second, TickTime: 500 * time.Millisecond}},
		{raw: "zk://al:pw@a", want: Config{Servers: []string{"a:2181"}, Root: "/lockrun", User: "al", Password: "pw"}},
		{raw: "zk://al@a", env: map[string]string{EnvPassword: "pw"}, want: Config{Servers: []string{"a:2181"}, Root: "/lockrun", User: "al", Password: "pw"}},
		{raw: "zk://a", env: map[string]string{EnvUser: "al", EnvPassword: "pw"}, want: Config{Servers: []string{"a:2181"}, Root: "/lockrun", User: "al", Password: "pw"}},
		{raw: "zk://a", env: map[string]string{EnvCACert: "/ignored/without/tls"}, want: Config{Servers: []string{"a:2181"}, Root: "/lockrun"}},
	} {
		got, err := parse(t, tc.raw, tc.env)
		if tc.want.DialTimeout == 0 {
			tc.want.DialTimeout, tc.want.RequestTimeout, tc.want.TickTime = DefaultDialTimeout, DefaultRequestTimeout, DefaultTickTime
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.raw, got, err, tc.want)
		}
	}
}

func TestParseURLRejects(t *testing.T) {
	for _, raw := range []string{
		"redis://a", "zk:a", "zk:///x", "zk://a,,b", "zk://a//x", "zk://a/x/../y", "zk://a/zookeeper",
		"zk://a?ttl=1s", "zk://a?dial_timeout=0", "zk://a?tick_time=soon", "zk://a?cacert=/x",
		"zk://u@a", "zk://:pw@a", "zks://a?cacert=/does/not/exist", "zks://a?cert=/x",
		// ZooKeeper refuses such paths only when lockrun first writes (exit
		// 69, "may work later"), and the raw bytes reached the terminal.
		"zk://a/x%00y", "zk://a/x%1b[31m", "zk://a/x%7f", "zk://a/x%c2%85", "zk://a/x%ff",
		"zk://a:99999", "zk://a:0", "zk://:2181", "zk://a,:2181",
	} {
		if _, err := parse(t, raw, nil); !errors.Is(err, backend.ErrInvalidURL) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidURL", raw, err)
		}
	}
	// A refused URL's message names the fix, never the password.
	if _, err := parse(t, "zk://al:s3cret@a?bogus=1", nil); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("ParseURL with a bad parameter = %v; want an error without the password", err)
	}
}

func TestParseURLLoadsTLSFiles(t *testing.T) {
	f := testcert.Write(t)
	for name, tc := range map[string]struct {
		raw string
		env map[string]string
	}{
		"params": {raw: "zks://a?cacert=" + f.CA + "&cert=" + f.Cert + "&key=" + f.Key},
		"env":    {raw: "zks://a", env: map[string]string{EnvCACert: f.CA, EnvCert: f.Cert, EnvKey: f.Key}},
	} {
		c, err := parse(t, tc.raw, tc.env)
		if err != nil || c.TLS == nil || c.TLS.RootCAs == nil || len(c.TLS.Certificates) != 1 {
			t.Errorf("%s: ParseURL(%q) = %+v, %v; want the CA and the client certificate loaded", name, tc.raw, c.TLS, err)
		}
	}
}
