package etcd

import (
	"errors"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
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
		{raw: "etcd://a", want: Config{Endpoints: []string{"a:2379"}, Prefix: "/lockrun/"}},
		{raw: "etcd://a:1,b:2/team/locks/", want: Config{Endpoints: []string{"a:1", "b:2"}, Prefix: "/team/locks/"}},
		{raw: "etcd://a/x?dial_timeout=250ms&request_timeout=2s", want: Config{Endpoints: []string{"a:2379"}, Prefix: "/x/", DialTimeout: 250 * time.Millisecond, RequestTimeout: 2 * time.Second}},
		{raw: "etcd://root:pw@a", want: Config{Endpoints: []string{"a:2379"}, Prefix: "/lockrun/", Username: "root", Password: "pw"}},
		{raw: "etcd://root@a", env: map[string]string{EnvPassword: "pw"}, want: Config{Endpoints: []string{"a:2379"}, Prefix: "/lockrun/", Username: "root", Password: "pw"}},
		{raw: "etcd://a", env: map[string]string{EnvCACert: "/ignored/without/tls"}, want: Config{Endpoints: []string{"a:2379"}, Prefix: "/lockrun/"}},
	} {
		got, err := parse(t, tc.raw, tc.env)
		if tc.want.DialTimeout == 0 {
			tc.want.DialTimeout, tc.want.RequestTimeout = DefaultDialTimeout, DefaultRequestTimeout
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.raw, got, err, tc.want)
		}
	}
}

func TestParseURLRejects(t *testing.T) {
	for _, raw := range []string{
		"redis://a", "etcd:a", "etcd:///x", "etcd://a,,b", "etcd://a//x", "etcd://a?ttl=1s",
		"etcd://a?dial_timeout=0", "etcd://a?request_timeout=soon", "etcd://a?cacert=/x",
		"etcd://u@a", "etcds://a?cacert=/does/not/exist", "etcds://a?cert=/x",
	} {
		if _, err := parse(t, raw, nil); !errors.Is(err, backend.ErrInvalidURL) {
			t.Errorf("ParseURL(%q) = %v, want ErrInvalidURL", raw, err)
		}
	}
}

func TestParseURLLoadsTLSFiles(t *testing.T) {
	f := testcert.Write(t)
	ca, cert, key := f.CA, f.Cert, f.Key
	for name, tc := range map[string]struct {
		raw string
		env map[string]string
	}{
		"params": {raw: "etcds://a?cacert=" + ca + "&cert=" + cert + "&key=" + key},
		"env":    {raw: "etcds://a", env: map[string]string{EnvCACert: ca, EnvCert: cert, EnvKey: key}},
	} {
		c, err := parse(t, tc.raw, tc.env)
		if err != nil || c.TLS == nil || c.TLS.RootCAs == nil || len(c.TLS.Certificates) != 1 {
			t.Errorf("%s: ParseURL(%q) = %+v, %v; want the CA and the client certificate loaded", name, tc.raw, c.TLS, err)
		}
	}
	if c, err := parse(t, "etcds://a", nil); err != nil || c.TLS == nil || c.TLS.RootCAs != nil {
		t.Errorf("etcds without files = %+v, %v; want TLS with the system's roots", c.TLS, err)
	}
}

func TestTLSServer(t *testing.T) {
	srv := etcdtest.StartTLS(t, etcdtest.Certs(testcert.Write(t)))
	roundTrip(t, openTest(t, srv.URL()), backendtest.Key(t))
	u, _ := url.Parse("etcds://" + srv.Addr())
	if _, err := OpenURL(t.Context(), u); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("etcds:// without the CA or a client certificate = %v, want ErrUnavailable", err)
	}
}
