package backend

import (
	"net/url"
	"strings"
)

// secretParams are query parameter names that may carry a credential: libpq's
// password and sslpassword, and common spellings that no backend of ours
// reads but a user may still write into a URL.
var secretParams = []string{"password", "pass", "passwd", "sslpassword", "token"}

// Redact returns raw with every password removed: the user-info password and
// any credential query parameter become "xxxxx". Text that is not a
// hierarchical URL (no scheme, or "scheme:opaque") is replaced entirely,
// since a password may sit anywhere in it: a typo such as
// "redis//:pw@host" or a keyword string "host=db password=pw".
func Redact(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "(unparsable URL)"
	case u.Scheme == "":
		return "(not a URL)"
	case u.Opaque != "":
		return u.Scheme + ":(redacted)"
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
