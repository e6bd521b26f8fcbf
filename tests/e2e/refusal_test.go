package e2e_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/pgtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// Config errors are not outages: through the binary, a refused password or
// ACL exits 77 and a missing database 78, at once (no retries) and in one
// line without the password; an unreachable server stays 69.
func TestRefusalsExit77And78(t *testing.T) {
	srv := redistest.Start(t, "--user", "app", "on", ">right-pw", "~other:*", "&*", "+@all", "--user", "default", "off")
	pg := pgtest.Shared()
	cases := []struct {
		name, url string
		want      int
	}{
		{"redis wrong password", "redis://app:wrong-pw@" + srv.Addr() + "/0", 77},
		{"redis ACL without lockrun's keys", "redis://app:right-pw@" + srv.Addr() + "/0", 77},
		{"postgres unknown role", withURL(t, pg, func(u *url.URL) { u.User = url.User("no_such_role_lockrun") }), 77},
		{"postgres missing database", withURL(t, pg, func(u *url.URL) { u.Path = "/no_such_db_lockrun" }), 78},
	}
	lockruntest.Binary(t) // built before the clock starts
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			began := time.Now()
			r := run(t, envFor(c.url), "run", "k", "--", "true")
			if took := time.Since(began); r.Code != c.want || strings.Count(r.Stderr, "\n") != 1 || strings.Contains(r.Stderr, "wrong-pw") || took > 3*time.Second {
				t.Errorf("exit %d after %v, stderr %q; want %d at once, one line, no password", r.Code, took, r.Stderr, c.want)
			}
			if r := run(t, envFor(c.url), "status", "k"); r.Code != c.want {
				t.Errorf("status: exit %d, %q; want %d", r.Code, r.Stderr, c.want)
			}
		})
	}
}

// withURL is raw changed by edit.
func withURL(t *testing.T, raw string, edit func(*url.URL)) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	edit(u)
	return u.String()
}
