package backend

import (
	"net/url"
	"strings"
)

// MisplacedUserinfo reports a URL whose user information Go did not see as
// such: an '@' after the authority, in the path or the fragment, means that
// a password held a '/' or '#' that was not percent-encoded. Backends refuse
// such URLs (the password would become a host, a database or a prefix, and
// reach error messages); Redact hides them.
func MisplacedUserinfo(u *url.URL) bool {
	return u.User == nil && u.Scheme != "" && u.Scheme != "file" && u.Opaque == "" && strings.Contains(u.Path+u.Fragment, "@")
}

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
	case u.User == nil && u.Scheme != "file" && strings.Contains(u.Path+u.RawQuery+u.Fragment, "@"):
		// A password with a '/', '?' or '#' in it, not percent-encoded,
		// ends the authority early: "redis://:2024/Summer@host" is host
		// ":2024" and path "/Summer@host". Hide all up to the last '@'.
		return u.Scheme + "://xxxxx@" + raw[strings.LastIndexByte(raw, '@')+1:]
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
