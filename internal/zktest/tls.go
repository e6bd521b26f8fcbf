package zktest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/testcert"
)

// StartTLS starts a standalone server that speaks TLS only (Netty, on its
// secure client port) with the certificate of f, and requires clients to
// present a certificate signed by f.CA. Its Addr is the TLS port; URL is
// of no use for it (it has no plain port).
func StartTLS(t testing.TB, f testcert.Files) *Server {
	t.Helper()
	if _, err := os.Stat(Jar); err != nil {
		t.Fatalf("ZooKeeper not installed (%v): run .ci/services.sh (apt-get install zookeeper)", err)
	}
	keystore := filepath.Join(t.TempDir(), "server.pem")
	if err := writeKeystore(keystore, f); err != nil {
		t.Fatal(err)
	}
	var s *Server
	backendtest.OnFreePorts(t, 1, func(ports []int) error {
		s = &Server{t: t, dir: t.TempDir(), id: 1, client: ports[0], tls: []string{
			"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
			"secureClientPort=" + strconv.Itoa(ports[0]), "secureClientPortAddress=127.0.0.1",
			"ssl.keyStore.location=" + keystore, "ssl.keyStore.type=PEM",
			"ssl.trustStore.location=" + f.CA, "ssl.trustStore.type=PEM",
			"ssl.clientAuth=need",
		}}
		t.Cleanup(s.Stop)
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		ca, err := os.ReadFile(f.CA)
		if err != nil || !pool.AppendCertsFromPEM(ca) {
			return fmt.Errorf("CA %s: %v", f.CA, err)
		}
		s.tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "127.0.0.1"}
		if err := s.configure(); err != nil {
			return err
		}
		if err := s.spawn(); err != nil {
			return err
		}
		return s.awaitReady()
	})
	return s
}

// writeKeystore writes the server's key, as PKCS#8 (what ZooKeeper's PEM
// reader takes), followed by its certificate.
func writeKeystore(path string, f testcert.Files) error {
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return fmt.Errorf("%s: no PEM block", f.Key)
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(f.Cert)
	if err != nil {
		return err
	}
	out := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), cert...)
	return os.WriteFile(path, out, 0o600)
}
