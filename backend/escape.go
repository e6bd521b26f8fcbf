package backend

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes text read from a store safe to show a person: control
// characters (terminal escapes, newlines, tabs), Unicode format characters
// (such as bidirectional overrides), invalid UTF-8 and the backslash
// become Go-style escapes (\x1b, \n, \u202e, \\); everything else is
// unchanged. Any holder, command line or URL that a store returns goes
// through it before it reaches a terminal or a log line.
func Escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			q := fmt.Sprintf("%+q", r) // '\x1b', '\n', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}
