package zookeeper

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/zktest"
)

// TestDigestAuth: nodes created with digest credentials are readable and
// writable with them only; the wrong password, another user or none is
// ErrPermission (exit 77), and no message shows a password.
func TestDigestAuth(t *testing.T) {
	srv := zktest.Start(t)
	root := "/" + backendtest.Key(t)
	url := func(userinfo string) string {
		return "zk://" + userinfo + srv.Addr() + root + "?tick_time=" + zktest.TickTime.String()
	}
	key := backendtest.Key(t)
	alice := openTest(t, url("alice:s3cret@"))
	l := backendtest.MustAcquire(t, alice, key, opts("alice", false))
	if st, err := alice.Inspect(t.Context(), key); err != nil || st.Holder != "alice" {
		t.Fatalf("alice's Inspect = %+v, %v", st, err)
	}
	for _, who := range []string{"alice:wrong@", "bob:s3cret@", ""} {
		b := openTest(t, url(who))
		_, err := b.Acquire(t.Context(), backendtest.Key(t), opts("bob", false))
		if !errors.Is(err, backend.ErrPermission) {
			t.Errorf("%q: Acquire under alice's root = %v, want ErrPermission", who, err)
		}
		if _, err := b.Inspect(t.Context(), key); !errors.Is(err, backend.ErrPermission) {
			t.Errorf("%q: Inspect of alice's lock = %v, want ErrPermission", who, err)
		}
		if err := b.ForceRelease(t.Context(), key); !errors.Is(err, backend.ErrPermission) {
			t.Errorf("%q: ForceRelease of alice's lock = %v, want ErrPermission", who, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: error shows the password: %v", who, err)
		}
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}
