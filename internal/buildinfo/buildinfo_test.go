package buildinfo

import "testing"

func TestDescribeVersion(t *testing.T) {
	cases := []struct{ v, c, d, want string }{
		{"", "", "", "dev"},
		{"v1.2.3", "", "", "v1.2.3"},
		{"v1.2.3", "4eaa294c0ffee1234567890abcdef", "2026-12-01T08:27:19Z", "v1.2.3 (commit 4eaa294c0ffe, 2026-12-01T08:27:19Z)"},
		{"", "abc", "", "dev (commit abc)"},
		{"v1.2.3-dirty", "", "2026-12-01T08:27:19Z", "v1.2.3-dirty (2026-12-01T08:27:19Z)"},
	}
	for _, c := range cases {
		if got := describeVersion(c.v, c.c, c.d); got != c.want {
			t.Errorf("describeVersion(%q, %q, %q) = %q, want %q", c.v, c.c, c.d, got, c.want)
		}
	}
}
