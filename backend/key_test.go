package backend

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateKey(t *testing.T) {
	good := []string{"a", "nightly-report", "deploy.prod_eu", "0", strings.Repeat("k", MaxKeyLen)}
	for _, k := range good {
		if err := ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", k, err)
		}
	}
	bad := []string{"", ".", "..", "../etc/passwd", "a/b", "-x", ".hidden", "a b", "k\x00", "é", "a:b", strings.Repeat("k", MaxKeyLen+1)}
	for _, k := range bad {
		if err := ValidateKey(k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
}

func TestRedact(t *testing.T) {
	cases := map[string]string{
		"redis://user:s3cret@host:6379/0":                   "redis://user:xxxxx@host:6379/0",
		"postgres://app@db/app?sslmode=disable&password=s3": "postgres://app@db/app?password=xxxxx&sslmode=disable",
		"file:///var/lock/lockrun":                          "file:///var/lock/lockrun",
		"etcd://a:2379,b:2379":                              "etcd://a:2379,b:2379",
	}
	for in, want := range cases {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(Redact(in), "s3") {
			t.Errorf("Redact(%q) leaks the password", in)
		}
	}
	for _, in := range []string{"redis://u:s3@h:1:2:%zz", "redis//:s3@host", "host=db user=app password=s3", "redis:s3@h"} {
		if got := Redact(in); strings.Contains(got, "s3") {
			t.Errorf("Redact(%q) = %q leaks the password", in, got)
		}
	}
}
