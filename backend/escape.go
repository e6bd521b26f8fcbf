package backend

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes text read from a store safe to print for people: every
// character that is not printable (control characters such as ESC, BEL and
// newline, DEL, C1 controls, bidirectional overrides and other format
// characters) and every byte that is not UTF-8 is written as a Go escape
// (\n, \x1b, \u202e), and a backslash as \\, so that the output is one
// line, cannot drive the terminal, and cannot be confused with an escape.
// Another user, or a damaged record, may have written anything.
func Escape(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case r == '\\':
			b.WriteString(`\\`)
		case unicode.IsPrint(r):
			b.WriteString(s[i : i+n])
		default:
			b.WriteString(escapeRune(r))
		}
		i += n
	}
	return b.String()
}

// needsEscape is the fast path: most holders are plain ASCII.
func needsEscape(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return true
		}
	}
	return false
}

func escapeRune(r rune) string {
	switch r {
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	const digits = "0123456789abcdef"
	if r < 0x80 {
		return `\x` + hex2(byte(r))
	}
	width, prefix := 4, `\u`
	if r > 0xffff {
		width, prefix = 8, `\U`
	}
	out := []byte(prefix)
	for shift := 4 * (width - 1); shift >= 0; shift -= 4 {
		out = append(out, digits[(r>>shift)&0xf])
	}
	return string(out)
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}
