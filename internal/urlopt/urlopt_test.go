package urlopt

import (
	"crypto/tls"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/testcert"
)

func TestKnown(t *testing.T) {
	if err := Known(url.Values{"a": {"1"}, "b": {""}}, "a", "b", "c"); err != nil {
		t.Errorf("Known(a, b) = %v, want nil", err)
	}
	err := Known(url.Values{"a": {"1"}, "z": {"1"}, "y": {"1"}}, "a", "b")
	if err == nil || err.Error() != `unknown parameter "y": use a, b` {
		t.Errorf("Known(a, y, z) = %v, want the first unknown name, y, and the known ones", err)
	}
}

func TestDuration(t *testing.T) {
	q := url.Values{"set": {"250ms"}, "empty": {""}, "zero": {"0"}, "negative": {"-1s"}, "bare": {"5"}}
	for name, want := range map[string]time.Duration{"set": 250 * time.Millisecond, "empty": time.Second, "absent": time.Second} {
		if d, err := Duration(q, name, time.Second); err != nil || d != want {
			t.Errorf("Duration(%s) = %v, %v; want %v", name, d, err, want)
		}
	}
	for _, name := range []string{"zero", "negative", "bare"} {
		want := name + `="` + q.Get(name) + `": use a positive duration such as ` + name + "=1s"
		if _, err := Duration(q, name, time.Second); err == nil || err.Error() != want {
			t.Errorf("Duration(%s) = %v, want %q", name, err, want)
		}
	}
}

func TestTLSLoadsFiles(t *testing.T) {
	f := testcert.Write(t)
	c, err := TLS(File{"ca", f.CA}, File{"cert", f.Cert}, File{"key", f.Key})
	if err != nil || c.RootCAs == nil || len(c.Certificates) != 1 || c.MinVersion != tls.VersionTLS12 || c.InsecureSkipVerify {
		t.Fatalf("TLS(all files) = %+v, %v; want the CA, one client certificate, TLS 1.2+, verification on", c, err)
	}
	c, err = TLS(File{Name: "ca"}, File{Name: "cert"}, File{Name: "key"})
	if err != nil || c.RootCAs != nil || len(c.Certificates) != 0 {
		t.Errorf("TLS(no files) = %+v, %v; want the system's roots and no client certificate", c, err)
	}
}

func TestTLSRejects(t *testing.T) {
	f := testcert.Write(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for want, files := range map[string][3]File{
		"ca: open /no/such":                 {{"ca", "/no/such"}, {Name: "cert"}, {Name: "key"}},
		"ca " + notPEM + " holds no PEM":    {{"ca", notPEM}, {Name: "cert"}, {Name: "key"}},
		"give cert and key together":        {{Name: "ca"}, {"cert", f.Cert}, {Name: "key"}},
		"give cert and key (or K) together": {{Name: "ca"}, {Name: "cert"}, {"key (or K)", f.Key}},
		"cert/key: ":                        {{Name: "ca"}, {"cert", f.Cert}, {"key", notPEM}},
	} {
		if _, err := TLS(files[0], files[1], files[2]); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("TLS(%v) = %v, want an error starting %q", files, err, want)
		}
	}
}

func TestHosts(t *testing.T) {
	got, err := Hosts("a,b:1,[::1]", "9")
	if err != nil || strings.Join(got, " ") != "a:9 b:1 [::1]:9" {
		t.Fatalf("Hosts = %q, %v", got, err)
	}
	if _, err := Hosts("a,,b", "9"); err == nil {
		t.Fatal("Hosts accepted an empty entry")
	}
}

func TestQueryTLSPlainRefusesFiles(t *testing.T) {
	q := url.Values{"cert": {"x"}}
	if _, err := QueryTLS(q, false, "etcds", TLSEnv{}, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "etcds://") {
		t.Fatalf("QueryTLS on a plain scheme with cert = %v", err)
	}
	if c, err := QueryTLS(url.Values{}, false, "etcds", TLSEnv{}, func(string) string { return "" }); c != nil || err != nil {
		t.Fatalf("QueryTLS plain = %v, %v", c, err)
	}
}
