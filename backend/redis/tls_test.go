package redis

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
	"github.com/lockrun/lockrun/internal/testcert"
)

// TLS: the server is verified against ca_file (never skipped), and a
// client certificate is presented when the server asks for one.
func TestTLS(t *testing.T) {
	certs := testcert.Write(t)
	port := strconv.Itoa(backendtest.FreePort(t))
	redistest.Start(t, "--tls-port", port,
		"--tls-cert-file", certs.Cert, "--tls-key-file", certs.Key,
		"--tls-ca-cert-file", certs.CA, "--tls-auth-clients", "yes")
	base := "rediss://127.0.0.1:" + port + "/0"
	client := "cert_file=" + certs.Cert + "&key_file=" + certs.Key

	b := open(t, base+"?"+redistest.NoRestartWait+"&ca_file="+certs.CA+"&"+client)
	l := backendtest.MustAcquire(t, b, "k", opts("h", time.Minute))
	l.Release(t.Context())
	for name, raw := range map[string]string{
		"a server the system's roots do not vouch for": base + "?" + client,
		"no client certificate":                        base + "?ca_file=" + certs.CA,
	} {
		if _, err := tryOpen(raw); !errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("%s: OpenURL = %v, want ErrUnavailable", name, err)
		}
	}
}
