package file

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

// The Revoker suite, with the values of TestSemaphores (those of
// TestOperators, and Crash: a lease ends only with its holder's files).
func TestRevoke(t *testing.T) {
	dir := t.TempDir()
	backendtest.RunRevoke(t, backendtest.Operators{
		Harness: backendtest.Harness{
			Open: func(t *testing.T) backend.Backend {
				b, err := Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				return b
			},
			Crash: func(t *testing.T, l backend.Lease) { l.(*lease).abandon() },
			TTL:   time.Second,
		},
		RenewedResolution: 10 * time.Millisecond,
	})
}

// A Revoke racing its holder's renewal and release leaves the lock free,
// for a plain lock and a semaphore: never stuck with a record that nobody
// holds, and never revoking the next holder, who took the lock after the
// one revoked had let go.
func TestRevokeRacesRenewAndRelease(t *testing.T) {
	for _, limit := range []int{1, 2} {
		t.Run(fmt.Sprint("limit", limit), func(t *testing.T) {
			b, _ := Open(t.TempDir())
			for i := range 40 {
				a := backendtest.MustAcquire(t, b, "k", semOpts(fmt.Sprint("a", i), limit))
				revoked := make(chan error, 1)
				go func() { revoked <- b.Revoke(t.Context(), "k", a.Token()) }()
				if err := a.Renew(t.Context()); err != nil && !errors.Is(err, backend.ErrLost) {
					t.Fatalf("Renew racing Revoke: %v", err)
				}
				if err := a.Release(t.Context()); err != nil && !errors.Is(err, backend.ErrLost) {
					t.Fatalf("Release racing Revoke: %v", err)
				}
				next, err := b.Acquire(t.Context(), "k", semOpts(fmt.Sprint("b", i), limit))
				if err != nil {
					t.Fatalf("Acquire after a released holder's Revoke: %v", err)
				}
				if err := <-revoked; err != nil && !errors.Is(err, backend.ErrLost) {
					t.Fatalf("Revoke racing Release: %v", err)
				}
				if err := next.Renew(t.Context()); err != nil {
					t.Fatalf("the next holder lost the lock to a Revoke of the one before: %v", err)
				}
				if st, _ := b.Inspect(t.Context(), "k"); !st.HoldsToken(next.Token()) || st.Revoked {
					t.Errorf("Inspect of the next holder = %+v; want it held, not revoked", st)
				}
				if next.Token() <= a.Token() {
					t.Errorf("token %d after %d", next.Token(), a.Token())
				}
				if err := next.Release(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A revoked holder whose lockrun is SIGKILLed before it could release (the
// file backend's "server" restart: its lockrun's state is gone) keeps the
// lock or slot while its command lives, shown revoked; the command's death
// frees it.
func TestRevokedHolderKeepsItUntilItsCommandDies(t *testing.T) {
	for _, limit := range []int{1, 2} {
		t.Run(fmt.Sprint("limit", limit), func(t *testing.T) {
			dir := t.TempDir()
			b, _ := Open(dir)
			h := startHelper(t, dir, "k", limit, false, true)
			child, _ := strconv.Atoi(h.line(t, "child"))
			token, _ := strconv.ParseUint(h.line(t, "token"), 10, 64)
			if err := b.Revoke(t.Context(), "k", backend.Token(token)); err != nil {
				t.Fatalf("Revoke: %v", err)
			}
			h.kill()
			time.Sleep(100 * time.Millisecond)
			o := semOpts("late", limit)
			o.Limit = 0 // a plain acquirer: a slot or the lock, either keeps it out
			if l, err := b.Acquire(t.Context(), "k", o); err == nil {
				l.Release(t.Context())
				t.Fatal("a revoked holder's lock was granted while its command still ran")
			}
			st, err := b.Inspect(t.Context(), "k")
			if err != nil {
				t.Fatal(err)
			}
			if !st.HoldsToken(backend.Token(token)) || !st.Revoked {
				t.Errorf("Inspect while the revoked holder's command runs = %+v; want it held, revoked", st)
			}
			if all, err := b.List(t.Context(), ""); err != nil || len(all) != 1 || !all[0].Revoked {
				t.Errorf("List while the revoked holder's command runs = %+v, %v; want it, revoked", all, err)
			}
			if err := b.Revoke(t.Context(), "k", backend.Token(token)); err != nil {
				t.Errorf("a second Revoke of a holder still stopping = %v, want nil", err)
			}
			killPid(t, child)
			l, err := b.Acquire(t.Context(), "k", semOpts("after", limit))
			if err != nil {
				t.Fatalf("Acquire after the revoked holder's command died: %v", err)
			}
			if l.Token() <= backend.Token(token) {
				t.Errorf("token %d after %d", l.Token(), token)
			}
			l.Release(t.Context())
		})
	}
}

// A record written by a lockrun from before Revoke (no revocation record
// in the file) reads as not revoked.
func TestOldRecordIsNotRevoked(t *testing.T) {
	dir := t.TempDir()
	b, _ := Open(dir)
	l := backendtest.MustAcquire(t, b, "k", opts("old"))
	defer l.Release(t.Context())
	f := l.(*lease).f
	if err := f.Truncate(revokedSlot * slotSize); err != nil { // two record slots, as a new file's first grant
		t.Fatal(err)
	}
	if st, _ := b.Inspect(t.Context(), "k"); !st.Held || st.Revoked {
		t.Errorf("Inspect of a record with no revocation = %+v; want held, not revoked", st)
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Errorf("Renew: %v", err)
	}
}

// Two revokers racing a change of holder: one reads the holder it revokes,
// the holder lets go and the next one takes the lock, another revoker
// revokes the next one, then the first writes its record. The next holder
// stays revoked: the first revoker's record, of a run gone already, must
// not replace the one that revokes it.
func TestRevokersRacingAChangeOfHolder(t *testing.T) {
	for _, revoke := range []struct {
		name string
		call func(b *Backend, token backend.Token) error
	}{
		{"Revoke", func(b *Backend, token backend.Token) error { return b.Revoke(t.Context(), "k", token) }},
		{"ForceRelease", func(b *Backend, _ backend.Token) error { return b.ForceRelease(t.Context(), "k") }},
	} {
		t.Run(revoke.name, func(t *testing.T) {
			b, _ := Open(t.TempDir())
			first := backendtest.MustAcquire(t, b, "k", semOpts("first", 1))
			read, resume := make(chan struct{}), make(chan struct{})
			var calls atomic.Int32
			beforeRevoking = func() {
				if calls.Add(1) == 1 { // the first revoker waits; the second goes on
					close(read)
					<-resume
				}
			}
			defer func() { beforeRevoking = func() {} }()
			stale := make(chan error, 1)
			go func() { stale <- revoke.call(b, first.Token()) }()
			<-read // the first revoker has read the first holder
			if err := first.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
			next := backendtest.MustAcquire(t, b, "k", semOpts("next", 1))
			defer next.Release(t.Context())
			fresh := make(chan error, 1)
			go func() { fresh <- revoke.call(b, next.Token()) }()
			time.Sleep(50 * time.Millisecond) // the second revoker gets as far as it can
			close(resume)
			if err := <-stale; err != nil && !errors.Is(err, backend.ErrLost) {
				t.Fatalf("the first revoker: %v", err)
			}
			if err := <-fresh; err != nil {
				t.Fatalf("the second revoker: %v", err)
			}
			// The record, not only the holder's watch of it, which may have
			// seen it before it was replaced: Inspect, a holder's min-hold
			// and a lockrun that reads it later go by the record.
			if st, err := b.Inspect(t.Context(), "k"); err != nil || !st.HoldsToken(next.Token()) || !st.Revoked {
				t.Errorf("Inspect after both revocations = %+v, %v; want the next holder, revoked: the other revoker's record replaced its own", st, err)
			}
			if err := next.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
				t.Errorf("the next holder's Renew after its revocation = %v, want ErrLost", err)
			}
		})
	}
}
