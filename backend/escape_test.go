package backend

import "testing"

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"host-a:42":             "host-a:42",
		"ünïcode ok":            "ünïcode ok",
		"\x1b[31mred\x1b[0m":    `\x1b[31mred\x1b[0m`,
		"two\nlines\tand tab":   `two\nlines\tand tab`,
		"evil\u202etxt.exe":     `evil\u202etxt.exe`,
		"bad \xff byte":         `bad \xff byte`,
		`back\slash`:            `back\\slash`,
		"sh -c 'echo \"hi\"'":   "sh -c 'echo \"hi\"'",
		"\r overwrite the line": `\r overwrite the line`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
}
