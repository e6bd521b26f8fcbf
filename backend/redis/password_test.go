package redis

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// The password need not sit in the URL (a crontab, ps): it may come from
// $REDISCLI_AUTH, as for redis-cli, or from password_file.
func TestPasswordFromEnvironmentOrFile(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "s3cret pw")
	pwFile := filepath.Join(t.TempDir(), "redis.pw")
	if err := os.WriteFile(pwFile, []byte("s3cret pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvAuth, "s3cret pw")
	b := open(t, "redis://"+srv.Addr()+"/0?"+redistest.NoRestartWait)
	backendtest.MustAcquire(t, b, "env", opts("h", time.Minute)).Release(t.Context())

	t.Setenv(EnvAuth, "wrong")
	b = open(t, "redis://"+srv.Addr()+"/0?"+redistest.NoRestartWait+"&password_file="+pwFile)
	backendtest.MustAcquire(t, b, "file", opts("h", time.Minute)).Release(t.Context())

	if _, err := tryOpen("redis://:x@" + srv.Addr() + "/0?password_file=" + pwFile); !errors.Is(err, backend.ErrInvalidURL) {
		t.Errorf("a password in the URL and a password_file = %v, want ErrInvalidURL", err)
	}
	t.Setenv(EnvAuth, "")
	if _, err := tryOpen("redis://" + srv.Addr() + "/0?password_file=/no/such/file"); !errors.Is(err, backend.ErrInvalidURL) {
		t.Errorf("a missing password_file = %v, want ErrInvalidURL", err)
	}
}

// A password with an unencoded '/' turns into a path; the URL is refused
// and no error shows any part of it.
func TestMisparsedPasswordIsRefusedUnshown(t *testing.T) {
	for _, raw := range []string{"redis://:2024/Summer@127.0.0.1:1", "redis://u:2024/Summer@host/0"} {
		_, err := tryOpen(raw)
		if !errors.Is(err, backend.ErrInvalidURL) || strings.Contains(err.Error(), "Summer") {
			t.Errorf("OpenURL(%s) = %v; want ErrInvalidURL, without the password", backend.Redact(raw), err)
		}
	}
}

// A server that answers "wrong password" or "no such database" will answer
// so again: those are exit 77 and 78, not 69 ("may work later"), as the
// README's exit table says, and the Redlock backend already does.
func TestRefusalsAreNotOutages(t *testing.T) {
	srv := redistest.Start(t, "--requirepass", "right")
	t.Setenv(EnvAuth, "")
	for _, tc := range []struct {
		url  string
		want error
	}{
		{"redis://:wrong@" + srv.Addr() + "/0", backend.ErrPermission},
		{"redis://nobody:wrong@" + srv.Addr() + "/0", backend.ErrPermission},
		{"redis://" + srv.Addr() + "/0", backend.ErrPermission}, // NOAUTH
		{"redis://:right@" + srv.Addr() + "/99", backend.ErrConfig},
	} {
		_, err := tryOpen(tc.url)
		if !errors.Is(err, tc.want) || errors.Is(err, backend.ErrUnavailable) {
			t.Errorf("OpenURL(%s) = %v; want %v and not ErrUnavailable", backend.Redact(tc.url), err, tc.want)
		}
	}
}
