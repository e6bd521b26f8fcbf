// Package urlopt reads the query parameters that more than one backend's
// URL understands: the list of known parameters, positive durations, and
// the PEM files of a TLS client. Its errors carry no sentinel and no
// address: each backend wraps them in backend.ErrInvalidURL, once, with
// its own context.
package urlopt

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// Known returns an error naming a parameter of q that is not in known, and
// listing the known ones, or nil when q has no other. Names are checked in
// sorted order, so that the same URL always gives the same message.
func Known(q url.Values, known ...string) error {
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(known, name) {
			return fmt.Errorf("unknown parameter %q: use %s", name, strings.Join(known, ", "))
		}
	}
	return nil
}

// Duration returns the Go duration in q's parameter name, or def when q
// leaves the parameter out or empty. A value that does not parse or is not
// positive is an error that shows a valid setting, def's.
func Duration(q url.Values, name string, def time.Duration) (time.Duration, error) {
	s := q.Get(name)
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: use a positive duration such as %s=%v", name, s, name, def)
	}
	return d, nil
}

// File is a PEM file given to a backend: Name says where the user gave it
// (a query parameter or an environment variable), for error messages, and
// Path is the file ("" when it was not given).
type File struct{ Name, Path string }

// TLS returns a client configuration (TLS 1.2 or later) that verifies the
// server against the certificates in ca, or against the system's roots
// when ca has no path, and presents the client certificate in cert and key
// when both are given; giving only one of them is an error. There is no
// way to skip verification: that would hand the lock's integrity to anyone
// on the path. The caller sets ServerName when its client does not.
func TLS(ca, cert, key File) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca.Path != "" {
		pem, err := os.ReadFile(ca.Path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ca.Name, err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s holds no PEM certificate", ca.Name, ca.Path)
		}
	}
	if (cert.Path == "") != (key.Path == "") {
		return nil, fmt.Errorf("give %s and %s together", cert.Name, key.Name)
	}
	if cert.Path != "" {
		pair, err := tls.LoadX509KeyPair(cert.Path, key.Path)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", cert.Name, key.Name, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
