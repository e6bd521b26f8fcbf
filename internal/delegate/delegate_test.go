package delegate

import "testing"

// backendArg reads --backend as the CLI does, up to the command's "--".
func TestBackendArgReadsTheFlagAsTheCLIDoes(t *testing.T) {
	for _, c := range []struct {
		args  []string
		want  string
		found bool
	}{
		{[]string{"-b", "etcd://h", "k", "--", "true"}, "etcd://h", true},
		{[]string{"--backend=redis://h", "k", "--", "true"}, "redis://h", true},
		{[]string{"-backend", "zk://h", "k"}, "zk://h", true},
		{[]string{"--b=postgres://h/db", "k"}, "postgres://h/db", true},
		{[]string{"-b", "etcd://a", "-q", "--backend", "etcd://b", "k"}, "etcd://b", true}, // the last one, as the CLI
		{[]string{"k", "--", "lockrun", "run", "-b", "etcd://h"}, "", false},               // the command's own
		{[]string{"--holder", "me", "k", "--", "true"}, "", false},
		{[]string{"-b"}, "", false},
		{[]string{"--bee", "x", "k"}, "", false},
	} {
		if got, found := backendArg(c.args); got != c.want || found != c.found {
			t.Errorf("backendArg(%q) = %q, %v; want %q, %v", c.args, got, found, c.want, c.found)
		}
	}
}

// scheme reads the scheme net/url would read, lower-cased.
func TestSchemeReadsTheURLsScheme(t *testing.T) {
	for raw, want := range map[string]string{
		"etcd://h:2379": "etcd", "REDIS://h": "redis", "postgresql://u@h/db": "postgresql",
		"zks://a,b/p": "zks", "x+y-z.1://h": "x+y-z.1",
		"": "", "etcd": "", "://h": "", "1etcd://h": "", "et cd://h": "", "/tmp/x:y": "",
		"z\u212a://h": "", "etcd\x00://h": "", "[etcd://h": "",
	} {
		if got := scheme(raw); got != want {
			t.Errorf("scheme(%q) = %q, want %q", raw, got, want)
		}
	}
}

// The mark carries the version and the chain of programs started; a mark
// of a release before chains is a version alone.
func TestMarkRoundTrips(t *testing.T) {
	v, chain := ParseMark(mark([]string{"lockrun-etcd", "lockrun-redis"}))
	if v == "" || len(chain) != 2 || chain[0] != "lockrun-etcd" || chain[1] != "lockrun-redis" {
		t.Errorf("ParseMark(mark(...)) = %q, %q", v, chain)
	}
	if v, chain := ParseMark("v1.2.3 (commit abc)"); v != "v1.2.3 (commit abc)" || chain != nil {
		t.Errorf("ParseMark of a version alone = %q, %q", v, chain)
	}
	if v, chain := ParseMark("v1|x|lockrun-etcd"); v != "v1|x" || len(chain) != 1 || chain[0] != "lockrun-etcd" {
		t.Errorf("ParseMark of a version with '|' = %q, %q", v, chain)
	}
}
