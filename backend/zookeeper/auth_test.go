package zookeeper

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/testcert"
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

// TestTLSServer: zks:// with the CA and a client certificate works against
// a TLS-only ZooKeeper (Netty, client certificates required); without them
// the handshake fails and the ensemble counts as unreachable.
func TestTLSServer(t *testing.T) {
	f := testcert.Write(t)
	srv := zktest.StartTLS(t, f)
	q := url.Values{"cacert": {f.CA}, "cert": {f.Cert}, "key": {f.Key}, "tick_time": {zktest.TickTime.String()}}
	b := openTest(t, "zks://"+srv.Addr()+"/lockrun?"+q.Encode())
	l := backendtest.MustAcquire(t, b, backendtest.Key(t), opts("alice", false))
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenURL(t.Context(), mustURL(t, "zks://"+srv.Addr())); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("zks:// without the CA or a client certificate = %v, want ErrUnavailable", err)
	}
	if _, err := OpenURL(t.Context(), mustURL(t, "zk://"+srv.Addr())); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("zk:// to a TLS port = %v, want ErrUnavailable", err)
	}
}
