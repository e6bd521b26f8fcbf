package backend

import (
	"strings"
	"testing"
	"time"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"host:123":             "host:123",
		"héllo wörld":          "héllo wörld",
		"a\x1b[2Jb\x07":        `a\x1b[2Jb\x07`,
		"one\nlockrun: forged": `one\nlockrun: forged`,
		"tab\there\r":          `tab\there\r`,
		"del\x7f":              `del\x7f`,
		"c1\u009b31m":          `c1\u009b31m`,
		"bidi\u202eevil":       `bidi\u202eevil`,
		"bad\xffutf8":          `bad\xffutf8`,
		`back\slash`:           `back\\slash`,
		"emoji 🔒":              "emoji 🔒",
		"tag\U000E0041":        `tag\U000e0041`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHeldErrorEscapesTheHolder(t *testing.T) {
	err := &HeldError{Status: Status{Key: "k", Held: true, Holder: "evil\x1b]0;pwned\x07\nlockrun: fake", Token: 7, TTL: time.Second}}
	msg := err.Error()
	if strings.ContainsAny(msg, "\x1b\x07\n") {
		t.Errorf("HeldError.Error() = %q: raw control characters from the store", msg)
	}
	if !strings.Contains(msg, `evil\x1b]0;pwned\x07\nlockrun: fake`) {
		t.Errorf("HeldError.Error() = %q: holder not shown escaped", msg)
	}
}
