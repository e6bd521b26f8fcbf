package redlock

import (
	"errors"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

// Inspect reports the holder's record, grant and renewal times; List
// finds the held locks under a prefix, sorted, on a majority.
func TestStatusAndList(t *testing.T) {
	servers := masters(t, 3)
	b := open(t, urlOf(servers))
	o := opts("alice", time.Minute)
	o.Info = backend.HolderInfo{User: "alice", Command: "backup --full", CIURL: "https://ci.example/1"}
	before := time.Now()
	l := backendtest.MustAcquire(t, b, "jobs.b", o)
	time.Sleep(20 * time.Millisecond)
	if err := l.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	st, err := b.Inspect(t.Context(), "jobs.b")
	if err != nil || st.Info != o.Info || st.Since.Before(before.Add(-time.Second)) || st.Since.After(time.Now()) || st.Renewed.Sub(st.Since) < 15*time.Millisecond || st.TTL < 59*time.Second {
		t.Errorf("Inspect = %+v, %v; want alice's record, since about %v, renewed 20ms later, a minute left", st, err, before)
	}
	backendtest.MustAcquire(t, b, "jobs.a", opts("bob", time.Minute))
	backendtest.MustAcquire(t, b, "other", opts("carol", time.Minute))
	servers[0].Stop()
	list, err := b.List(t.Context(), "jobs.")
	if err != nil || len(list) != 2 || list[0].Key != "jobs.a" || list[1].Key != "jobs.b" || list[1].Info != o.Info {
		t.Errorf("List(jobs.) = %+v, %v; want jobs.a then jobs.b with alice's record", list, err)
	}
	servers[1].Stop()
	if _, err := b.List(t.Context(), ""); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("List with a majority down = %v, want ErrUnavailable", err)
	}
}

// With MinHold, Release leaves the lock held by its holder until the
// grant plus MinHold, then it frees itself; the token is unchanged.
func TestMinHold(t *testing.T) {
	b := open(t, urlOf(masters(t, 3)))
	o := opts("alice", time.Minute)
	o.MinHold = 400 * time.Millisecond
	l := backendtest.MustAcquire(t, b, "k", o)
	granted := time.Now()
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Inspect(t.Context(), "k"); err != nil || !st.Held || st.Holder != "alice" || st.Token != l.Token() || st.TTL > o.MinHold {
		t.Errorf("Inspect after a release within the min hold = %+v, %v; want still alice's, token %d, at most %v left", st, err, l.Token(), o.MinHold)
	}
	w := waiter(t, b, "k", "bob")
	got := <-w
	if took := time.Since(granted); got == nil || took < o.MinHold || took > o.MinHold+time.Second {
		t.Errorf("the next holder got the lock %v after the grant; want just after the %v min hold", took, o.MinHold)
	}
	if got != nil {
		got.Release(t.Context())
	}
}
