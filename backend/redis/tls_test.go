package redis

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/backend/backendtest"
	"github.com/lockrun/lockrun/backend/redis/redistest"
)

// TLS: the server is verified against ca_file (never skipped), and a
// client certificate is presented when the server asks for one.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca := writeCerts(t, dir)
	port := strconv.Itoa(backendtest.FreePort(t))
	redistest.Start(t, "--tls-port", port,
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", ca, "--tls-auth-clients", "yes")
	base := "rediss://127.0.0.1:" + port + "/0"
	client := "cert_file=" + filepath.Join(dir, "client.pem") + "&key_file=" + filepath.Join(dir, "client.key")

	b := open(t, base+"?ca_file="+ca+"&"+client)
	l, err := b.Acquire(t.Context(), "k", opts("h", time.Minute))
	if err != nil {
		t.Fatalf("Acquire over TLS: %v", err)
	}
	l.Release(t.Context())
	for name, raw := range map[string]string{
		"a server the system's roots do not vouch for": base + "?" + client,
		"no client certificate":                        base + "?ca_file=" + ca,
	} {
		if _, err := tryOpen(raw); !errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("%s: OpenURL = %v, want ErrUnavailable", name, err)
		}
	}
}

// writeCerts writes a CA, a server certificate for 127.0.0.1 and a client
// certificate into dir, and returns the CA's file.
func writeCerts(t *testing.T, dir string) string {
	t.Helper()
	caKey, caCert := newCert(t, dir, "ca", nil, nil)
	newCert(t, dir, "server", caKey, caCert)
	newCert(t, dir, "client", caKey, caCert)
	return filepath.Join(dir, "ca.pem")
}

// newCert writes NAME.pem and NAME.key, signed by parent (self-signed when
// nil), and returns the key and certificate.
func newCert(t *testing.T, dir, name string, parentKey *ecdsa.PrivateKey, parent *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "lockrun test " + name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, kind string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(name+".pem", "CERTIFICATE", der)
	write(name+".key", "EC PRIVATE KEY", keyDER)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}
