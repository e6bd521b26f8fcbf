package backend

import (
	"net/url"
	"strings"
)

// secretParams are query parameters that carry credentials in the URLs our
// backends accept (libpq's password, Redis and etcd passwords, TLS keys).
var secretParams = []string{"password", "pass", "passwd", "sslpassword", "token"}

// Redact returns raw with every password removed: the user-info password and
// any credential query parameter become "xxxxx". Text that does not parse as
// a URL is replaced entirely, since it may itself be a secret.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if q := u.Query(); len(q) > 0 {
		changed := false
		for name := range q {
			for _, s := range secretParams {
				if strings.EqualFold(name, s) {
					q.Set(name, "xxxxx")
					changed = true
				}
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}
