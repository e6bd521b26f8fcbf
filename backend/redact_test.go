package backend

import (
	"net/url"
	"strings"
	"testing"
)

// A password with a '/', '?' or '#' in it, not percent-encoded, makes Go
// parse the URL differently: the userinfo ends at the first '/', so the
// password lands in the host, the path, the query or the fragment.
func TestRedactOddParses(t *testing.T) {
	for in, secret := range map[string]string{
		"redis://:2024/Summer@host":         "Summer",
		"redis://u:2024/Summer@host:6379/0": "Summer",
		"redis://:pa?ss@host":               "ss@",
		"redis://:pa#ss@host":               "ss@",
		"postgres://app:x/y@db/app":         "x/y",
		"etcds://root:a/b@h1:2379,h2":       "a/b",
	} {
		got := Redact(in)
		if strings.Contains(got, secret) || strings.Contains(got, "2024") {
			t.Errorf("Redact(%q) = %q leaks the password", in, got)
		}
		u, err := url.Parse(in)
		if err == nil && !MisplacedUserinfo(u) {
			t.Errorf("MisplacedUserinfo(%q) = false", in)
		}
	}
	for _, in := range []string{"redis://u:p@host/0", "file:///var/lock/a@b", "postgres://db/app?sslmode=disable"} {
		u, _ := url.Parse(in)
		if MisplacedUserinfo(u) {
			t.Errorf("MisplacedUserinfo(%q) = true for a well-formed URL", in)
		}
	}
}
