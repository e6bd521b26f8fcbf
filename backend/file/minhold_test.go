package file

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

// A min-hold keeps the key taken after the holder is gone, crashed or
// released, until the grant plus the min-hold; not beyond it.
func TestMinHoldOutlivesTheHolder(t *testing.T) {
	b, _ := Open(t.TempDir())
	for name, end := range map[string]func(backend.Lease){
		"released": func(l backend.Lease) { l.Release(t.Context()) },
		"crashed":  func(l backend.Lease) { l.(*lease).abandon() },
	} {
		key := "k-" + name
		o := opts("first")
		o.MinHold = 600 * time.Millisecond
		granted := time.Now()
		l := backendtest.MustAcquire(t, b, key, o)
		end(l)
		_, err := b.Acquire(t.Context(), key, opts("second"))
		var held *backend.HeldError
		if !errors.As(err, &held) || held.Status.RunID != "first" || held.Status.TTL <= 0 || held.Status.TTL > o.MinHold {
			t.Fatalf("%s: Acquire within the min-hold = %v; want held by the first run, with the hold left", name, err)
		}
		if st, _ := b.Inspect(t.Context(), key); !st.Held || st.Holder != "h" {
			t.Errorf("%s: Inspect within the min-hold = %+v", name, st)
		}
		w := opts("waiter")
		w.Wait = true
		l2 := backendtest.MustAcquire(t, b, key, w)
		if waited := time.Since(granted); waited < o.MinHold {
			t.Errorf("%s: a waiter was granted %v after the grant, within the %v min-hold", name, waited, o.MinHold)
		} else if waited > o.MinHold+1500*time.Millisecond {
			t.Errorf("%s: a waiter was granted only %v after the grant, min-hold %v", name, waited, o.MinHold)
		}
		if l2.Token() <= l.Token() {
			t.Errorf("%s: token %d after %d", name, l2.Token(), l.Token())
		}
		l2.Release(t.Context())
	}
}

func TestForceReleaseEndsAMinHold(t *testing.T) {
	b, _ := Open(t.TempDir())
	o := opts("first")
	o.MinHold = time.Hour
	backendtest.MustAcquire(t, b, "k", o).Release(t.Context())
	if err := b.ForceRelease(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	l := backendtest.MustAcquire(t, b, "k", opts("second"))
	l.Release(t.Context())
}

// A clock stepped back must not stretch a min-hold beyond its length.
func TestMinHoldIsBoundedByItsLength(t *testing.T) {
	now := time.Now()
	r := record{HoldUntil: now.Add(time.Hour).UnixMilli(), MinHold: 1000}
	if got := r.held(now); got != time.Second {
		t.Errorf("hold left %v with the clock an hour behind, want at most the 1s min-hold", got)
	}
}

func TestStatusSinceRenewedInfo(t *testing.T) {
	b, _ := Open(t.TempDir())
	o := opts("r")
	o.Info = backend.HolderInfo{User: "alice", Command: "backup --all " + strings.Repeat("x", 2000), CIURL: "https://ci.example/job/1"}
	before := time.Now().Truncate(time.Millisecond)
	l := backendtest.MustAcquire(t, b, "k", o)
	defer l.Release(t.Context())
	st, err := b.Inspect(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if st.Since.Before(before) || st.Since.After(time.Now()) || st.Renewed.Before(st.Since) {
		t.Errorf("since %v, renewed %v; granted after %v", st.Since, st.Renewed, before)
	}
	if st.Info.User != "alice" || !strings.HasPrefix(st.Info.Command, "backup --all x") || st.Info.CIURL != o.Info.CIURL {
		t.Errorf("info %+v, want it recorded (a long command shortened)", st.Info)
	}
	time.Sleep(20 * time.Millisecond)
	l.Renew(t.Context())
	if st2, _ := b.Inspect(t.Context(), "k"); !st2.Renewed.After(st.Renewed) {
		t.Errorf("renewed %v after a renewal, was %v", st2.Renewed, st.Renewed)
	}
}

func TestListHeldLocksSortedByKey(t *testing.T) {
	b, _ := Open(t.TempDir())
	for _, k := range []string{"job.b", "job-a", "job", "other"} {
		defer backendtest.MustAcquire(t, b, k, opts(k)).Release(t.Context())
	}
	backendtest.MustAcquire(t, b, "job.free", opts("f")).Release(t.Context())
	got, err := b.List(t.Context(), "job")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, st := range got {
		keys = append(keys, st.Key)
		if !st.Held || st.Token == 0 {
			t.Errorf("listed %+v", st)
		}
	}
	if strings.Join(keys, " ") != "job job-a job.b" {
		t.Errorf("List(job) = %v, want the held job, job-a, job.b in key order", keys)
	}
}

// flock(1) holding a lock file: lockrun names it as what it is, and does
// not pretend that a release broke it.
func TestForeignFlockHolder(t *testing.T) {
	dir := t.TempDir()
	b, _ := Open(dir)
	backendtest.MustAcquire(t, b, "k", opts("r")).Release(t.Context())
	fl := exec.Command("flock", "-n", filepath.Join(dir, "k.lock"), "sleep", "30")
	if err := fl.Start(); err != nil {
		t.Skip("no flock(1):", err)
	}
	defer func() { fl.Process.Kill(); fl.Wait() }()
	want := foreign(fl.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if st, _ := b.Inspect(t.Context(), "k"); st.Held {
			if st.Holder != want || st.Token != 0 || st.RunID != "" {
				t.Errorf("Inspect = %+v, want held by %q", st, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("flock(1) never took the lock")
		}
	}
	if _, err := b.Acquire(t.Context(), "k", opts("r2")); !errors.Is(err, backend.ErrHeld) || !strings.Contains(err.Error(), want) {
		t.Errorf("Acquire = %v, want ErrHeld naming %q", err, want)
	}
	if err := b.ForceRelease(t.Context(), "k"); !errors.Is(err, backend.ErrHeld) || !strings.Contains(err.Error(), "cannot break") {
		t.Errorf("ForceRelease = %v, want ErrHeld saying it cannot break it", err)
	}
}
