// Package testcert writes throw-away TLS certificates for tests: a CA and
// one certificate it signed for 127.0.0.1 that a test server and its
// clients can both present.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files names PEM files: the CA's certificate, and a certificate it signed
// (valid for 127.0.0.1, for server and client authentication, for an hour)
// with its key.
type Files struct{ CA, Cert, Key string }

// Write writes a new CA and leaf certificate into a temporary directory of
// t, failing the test on error.
func Write(t testing.TB) Files {
	t.Helper()
	dir := t.TempDir()
	caKey, ca := newCert(t, dir, "ca", nil, nil)
	newCert(t, dir, "leaf", caKey, ca)
	return Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "leaf.pem"), Key: filepath.Join(dir, "leaf.key")}
}

// newCert writes NAME.pem and NAME.key, signed by parent (a CA signing
// itself when nil), and returns the key and certificate.
func newCert(t testing.TB, dir, name string, parentKey *ecdsa.PrivateKey, parent *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate) {
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
	write(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
	write(t, filepath.Join(dir, name+".key"), "EC PRIVATE KEY", keyDER)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

func write(t testing.TB, file, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
