package file

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

func semOpts(run string, limit int) backend.AcquireOptions {
	o := opts(run)
	o.Limit = limit
	return o
}

// A SIGKILLed lockrun's slot stays taken while its command lives (the
// command inherited the slot file and the key's lock file), and goes to
// the waiter the moment the command dies too.
func TestSemaphoreCrashedHolderKeepsItsSlotUntilItsCommandDies(t *testing.T) {
	dir := t.TempDir()
	b, _ := Open(dir)
	mine := backendtest.MustAcquire(t, b, "k", semOpts("mine", 2))
	defer mine.Release(t.Context())
	h := startHelper(t, dir, "k", 2, false, true)
	child, _ := strconv.Atoi(h.line(t, "child"))
	token, _ := strconv.ParseUint(h.line(t, "token"), 10, 64)
	got := make(chan backend.Lease, 1)
	go func() {
		o := semOpts("waiter", 2)
		o.Wait = true
		l, err := b.Acquire(t.Context(), "k", o)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	h.kill()
	select {
	case <-got:
		t.Fatal("the slot of a SIGKILLed lockrun was granted while its command still ran")
	case <-time.After(300 * time.Millisecond):
	}
	if st, _ := b.Inspect(t.Context(), "k"); len(st.Holders) != 2 || !st.HoldsToken(backend.Token(token)) {
		t.Errorf("Inspect while the dead lockrun's command runs = %+v; want both holders", st)
	}
	killed := time.Now()
	killPid(t, child)
	select {
	case l := <-got:
		if d := time.Since(killed); d > 500*time.Millisecond {
			t.Errorf("the waiter got the slot %v after the command died", d)
		}
		if l != nil && l.Token() <= backend.Token(token) {
			t.Errorf("token %d after the dead holder's %d", l.Token(), token)
		}
		if l != nil {
			l.Release(t.Context())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the slot never came free after the command died")
	}
}

// A waiter SIGKILLed in the queue leaves it: the waiter behind it gets the
// next slot.
func TestSemaphoreCrashedWaiterLeavesTheQueue(t *testing.T) {
	dir := t.TempDir()
	b, _ := Open(dir)
	held := []backend.Lease{
		backendtest.MustAcquire(t, b, "k", semOpts("a", 2)),
		backendtest.MustAcquire(t, b, "k", semOpts("b", 2)),
	}
	defer held[1].Release(t.Context())
	dead := startHelper(t, dir, "k", 2, true, false)
	time.Sleep(time.Second) // first in the queue
	got := make(chan backend.Lease, 1)
	go func() {
		o := semOpts("second", 2)
		o.Wait = true
		l, err := b.Acquire(t.Context(), "k", o)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(time.Second) // second in the queue
	dead.kill()
	released := time.Now()
	held[0].Release(t.Context())
	select {
	case l := <-got:
		if d := time.Since(released); d > 500*time.Millisecond {
			t.Errorf("the waiter behind a dead one got the slot %v after the release", d)
		}
		if l != nil {
			l.Release(t.Context())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a dead waiter kept the one behind it out")
	}
}

// A waiter whose context ends leaves the queue at once, holding nothing:
// neither a place that keeps the next waiter out nor the shared flock that
// keeps a plain lock out.
func TestSemaphoreWaiterThatGivesUpLeavesNothing(t *testing.T) {
	b, _ := Open(t.TempDir())
	a := backendtest.MustAcquire(t, b, "k", semOpts("a", 2))
	c := backendtest.MustAcquire(t, b, "k", semOpts("c", 2))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	o := semOpts("impatient", 2)
	o.Wait = true
	if _, err := b.Acquire(ctx, "k", o); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire of a full semaphore until a deadline = %v", err)
	}
	a.Release(t.Context())
	l := backendtest.MustAcquire(t, b, "k", semOpts("next", 2)) // no waiter ahead of it any more
	l.Release(t.Context())
	c.Release(t.Context())
	plain := backendtest.MustAcquire(t, b, "k", opts("plain"))
	plain.Release(t.Context())
}

// Acquirers of limits 1, 2 and 3 race for one key: the holders at any
// moment share one limit and never exceed it, and no token repeats. The
// limit most of them ask for changes every 300 ms, so that each has its
// turn (a mismatch fails at once: a busy semaphore keeps a plain lock out,
// for as long as it stays busy); in the second half of each, a third of
// them ask for the next limit.
func TestSemaphoreLimitsNeverMixUnderRace(t *testing.T) {
	b, _ := Open(t.TempDir())
	var mu sync.Mutex
	inside := map[backend.Token]int{} // holder token → its limit
	seen := map[backend.Token]bool{}
	grants := map[int]int{}
	begin := time.Now()
	deadline := begin.Add(3 * time.Second)
	var wg sync.WaitGroup
	for g := range 9 {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline); i++ {
				since := time.Since(begin)
				phase := int(since / (300 * time.Millisecond))
				if g < 3 && since%(300*time.Millisecond) >= 150*time.Millisecond {
					phase++
				}
				limit := 1 + phase%3
				o := semOpts(fmt.Sprint("g", g, "-", i), limit)
				o.Wait = i%2 == 0
				ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
				l, err := b.Acquire(ctx, "k", o)
				cancel()
				if err != nil {
					if !errors.Is(err, backend.ErrHeld) && !errors.Is(err, backend.ErrLimitMismatch) && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Acquire with limit %d: %v", limit, err)
					}
					continue
				}
				mu.Lock()
				if seen[l.Token()] {
					t.Errorf("token %d issued twice", l.Token())
				}
				seen[l.Token()] = true
				for tok, lim := range inside {
					if lim != limit {
						t.Errorf("a holder of limit %d beside one of limit %d (token %d)", limit, lim, tok)
					}
				}
				if len(inside) >= limit {
					t.Errorf("%d holders of limit %d", len(inside)+1, limit)
				}
				inside[l.Token()] = limit
				grants[limit]++
				mu.Unlock()
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
				mu.Lock()
				delete(inside, l.Token())
				mu.Unlock()
				if err := l.Release(t.Context()); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if grants[1] == 0 || grants[2] == 0 || grants[3] == 0 {
		t.Errorf("grants by limit %v: every limit should have had its turn", grants)
	}
}

// oldRecord is the record of a lockrun before semaphores.
type oldRecord struct {
	Token  backend.Token `json:"token"`
	RunID  string        `json:"run_id"`
	Holder string        `json:"holder,omitempty"`
}

// A lock file an older lockrun wrote goes on under a semaphore from its
// token; the record a semaphore grant writes still reads, to an older
// lockrun, as a token to go on from.
func TestSemaphoreOverAnOlderLockFile(t *testing.T) {
	b, _ := Open(t.TempDir())
	f, err := os.OpenFile(b.path("k"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	future := backend.ClockToken(time.Now().Add(time.Hour))
	old, _ := encodeSlot(oldRecord{Token: future, RunID: "old", Holder: "old lockrun"})
	f.WriteAt(old, 0)
	f.Close()
	l := backendtest.MustAcquire(t, b, "k", semOpts("new", 2))
	if l.Token() != future+1 {
		t.Errorf("semaphore token %d over an older file's %d, want %d", l.Token(), future, future+1)
	}
	f, _ = os.Open(b.path("k"))
	buf := make([]byte, fileSize)
	f.ReadAt(buf, 0)
	f.Close()
	var best oldRecord
	for i := range 2 {
		var r oldRecord
		if decodeSlot(buf[i*slotSize:(i+1)*slotSize], &r) == nil && r.Token > best.Token {
			best = r
		}
	}
	if best.Token != l.Token() {
		t.Errorf("an older lockrun reads token %d, want the semaphore's %d", best.Token, l.Token())
	}
	l.Release(t.Context())
	p := backendtest.MustAcquire(t, b, "k", opts("plain"))
	if p.Token() <= l.Token() {
		t.Errorf("plain token %d after the semaphore's %d", p.Token(), l.Token())
	}
	p.Release(t.Context())
}

// A plain acquirer after a semaphore whose holder left within its
// min-hold meets the semaphore's limit, waiting or not; then the min-hold
// ends and the plain lock goes on from the semaphore's tokens.
func TestPlainLockAfterASemaphoreMinHold(t *testing.T) {
	b, _ := Open(t.TempDir())
	o := semOpts("cron", 2)
	o.MinHold = 400 * time.Millisecond
	s := backendtest.MustAcquire(t, b, "k", o)
	s.Release(t.Context())
	for _, wait := range []bool{false, true} {
		p := opts("plain")
		p.Wait = wait
		var le *backend.LimitError
		if _, err := b.Acquire(t.Context(), "k", p); !errors.As(err, &le) || le.Have != 2 || le.Want != 1 {
			t.Errorf("plain Acquire (wait %v) within a semaphore's min-hold = %v; want a LimitError", wait, err)
		}
	}
	time.Sleep(time.Until(s.Start().Add(o.MinHold + 10*time.Millisecond)))
	p := backendtest.MustAcquire(t, b, "k", opts("plain"))
	if p.Token() <= s.Token() {
		t.Errorf("plain token %d after %d", p.Token(), s.Token())
	}
	p.Release(t.Context())
}

// A holder hears at once that its slot was broken, its slot file removed
// or its key's lock file replaced, as a plain holder does.
func TestSemaphoreDoneReportsRevocationAtOnce(t *testing.T) {
	dir := t.TempDir()
	b, _ := Open(dir)
	for name, attack := range map[string]func(l backend.Lease){
		"released": func(l backend.Lease) { b.ReleaseHolder(t.Context(), "k", l.Token()) },
		"forced":   func(backend.Lease) { b.ForceRelease(t.Context(), "k") },
		"slot":     func(l backend.Lease) { os.Remove(l.(*lease).path) },
		"key":      func(backend.Lease) { os.Remove(b.path("k")) },
	} {
		l := backendtest.MustAcquire(t, b, "k", semOpts("r-"+name, 3))
		other := backendtest.MustAcquire(t, b, "k", semOpts("o-"+name, 3))
		done := l.(*lease).Done()
		for range 3 {
			if err := l.Renew(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-done:
			t.Fatalf("%s: Done before anything happened", name)
		case <-time.After(watchDelay + 50*time.Millisecond):
		}
		attack(l)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Errorf("%s: Done not closed 5s after the attack", name)
		}
		if err := l.Renew(t.Context()); !errors.Is(err, backend.ErrLost) {
			t.Errorf("%s: Renew = %v, want ErrLost", name, err)
		}
		l.Release(t.Context())
		other.Release(t.Context())
		os.Remove(b.path("k"))
	}
}

// Checkpoints stay a plain lock's: a semaphore holder's token stores none.
func TestSemaphoreHolderStoresNoCheckpoint(t *testing.T) {
	b, _ := Open(t.TempDir())
	l := backendtest.MustAcquire(t, b, "k", semOpts("r", 2))
	defer l.Release(t.Context())
	if err := b.SetCheckpoint(t.Context(), "k", l.Token(), []byte("x")); !errors.Is(err, backend.ErrLost) {
		t.Errorf("SetCheckpoint with a semaphore holder's token = %v, want ErrLost", err)
	}
	if _, ok, _ := b.GetCheckpoint(t.Context(), "k"); ok {
		t.Error("a checkpoint was stored")
	}
	if _, err := os.Stat(filepath.Join(b.Dir(), "k.lock.checkpoint")); err == nil {
		t.Error("a checkpoint file was written")
	}
}

// A retried Acquire of a run that holds a slot takes no second one.
func TestSemaphoreRetryTakesNoSecondSlot(t *testing.T) {
	b, _ := Open(t.TempDir())
	o := semOpts("r", 3)
	l := backendtest.MustAcquire(t, b, "k", o)
	defer l.Release(t.Context())
	if _, err := b.Acquire(t.Context(), "k", o); !errors.Is(err, backend.ErrHeld) {
		t.Errorf("a retried Acquire while the run holds a slot = %v, want ErrHeld", err)
	}
	if st, _ := b.Inspect(t.Context(), "k"); len(st.Holders) != 1 {
		t.Errorf("%d holders after a retry, want 1", len(st.Holders))
	}
	// decode check: the slot's record says its limit
	var r record
	f, _ := os.Open(l.(*lease).path)
	rec, _, _ := readState(f)
	f.Close()
	if b, _ := json.Marshal(rec); json.Unmarshal(b, &r) != nil || r.Limit != 3 {
		t.Errorf("slot record %+v, want limit 3", rec)
	}
}

// A lockrun frozen while it holds the semaphore's mutex (SIGSTOP in the
// middle of a grant) cannot keep a waiter past its context.
func TestSemaphoreWaitOutlastsNoContextBehindAFrozenGrant(t *testing.T) {
	b, _ := Open(t.TempDir())
	backendtest.MustAcquire(t, b, "k", semOpts("first", 2)).Release(t.Context())
	frozen, err := os.OpenFile(b.path("k"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close()
	if err := ofd(int(frozen.Fd()), unix.F_WRLCK, 0, 1, false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	o := semOpts("waiter", 2)
	o.Wait = true
	began := time.Now()
	if _, err := b.Acquire(ctx, "k", o); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire behind a frozen grant = %v, want the context's end", err)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("Acquire returned %v after its 200ms context", d)
	}
	unlockMutex(frozen)
	l := backendtest.MustAcquire(t, b, "k", semOpts("after", 2))
	l.Release(t.Context())
}

func TestSemaphoreTokenNeverWraps(t *testing.T) {
	b, _ := Open(t.TempDir())
	backendtest.MustAcquire(t, b, "k", semOpts("r", 2)).Release(t.Context())
	f, err := os.OpenFile(b.path("k"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, slot, _ := readState(f)
	writeState(f, record{Token: math.MaxUint64 - 1, RunID: "x", Limit: 2}, slot)
	f.Close()
	l := backendtest.MustAcquire(t, b, "k", semOpts("a", 2))
	if l.Token() != math.MaxUint64 {
		t.Errorf("token %d, want %d", l.Token(), uint64(math.MaxUint64))
	}
	defer l.Release(t.Context())
	if l, err := b.Acquire(t.Context(), "k", semOpts("b", 2)); !errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("Acquire past the last token = %v, %v; want ErrUnavailable (exit 69), never a wrap", l, err)
	}
}

// A waiter's lease starts when it got its slot, not when it began to wait:
// the runner counts the lease's deadline from Start, and a wait longer than
// the TTL would leave a lease already expired.
func TestSemaphoreWaiterStartsAtItsGrant(t *testing.T) {
	b, _ := Open(t.TempDir())
	a := backendtest.MustAcquire(t, b, "k", semOpts("a", 2))
	c := backendtest.MustAcquire(t, b, "k", semOpts("c", 2))
	defer c.Release(t.Context())
	got := make(chan backend.Lease, 1)
	go func() {
		o := semOpts("waiter", 2)
		o.Wait = true
		l, err := b.Acquire(t.Context(), "k", o)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(time.Second)
	released := time.Now()
	a.Release(t.Context())
	l := <-got
	if l == nil {
		return
	}
	defer l.Release(t.Context())
	if l.Start().Before(released) {
		t.Errorf("the waiter's lease starts %v before the release that gave it its slot", released.Sub(l.Start()))
	}
}

// A released slot goes to the first waiter at once even while another
// process still has the slot file open (lockrun's watchdog keeps the
// lock's files until it exits, after the release): the release itself
// wakes the waiter, not only the file's last close.
func TestSemaphoreReleaseWakesTheWaiterWhileTheWatchdogHasTheFile(t *testing.T) {
	b, _ := Open(t.TempDir())
	a := backendtest.MustAcquire(t, b, "k", semOpts("a", 2))
	c := backendtest.MustAcquire(t, b, "k", semOpts("c", 2))
	defer c.Release(t.Context())
	var watchdog []*os.File
	for _, f := range a.(*lease).Files() {
		fd, err := syscall.Dup(int(f.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		watchdog = append(watchdog, os.NewFile(uintptr(fd), f.Name()))
	}
	defer func() {
		for _, f := range watchdog {
			f.Close()
		}
	}()
	got := make(chan time.Time, 1)
	go func() {
		o := semOpts("waiter", 2)
		o.Wait = true
		l, err := b.Acquire(t.Context(), "k", o)
		if err != nil {
			t.Error(err)
		}
		got <- time.Now()
		l.Release(t.Context())
	}()
	time.Sleep(time.Second)
	released := time.Now()
	a.Release(t.Context())
	select {
	case at := <-got:
		if d := at.Sub(released); d > 500*time.Millisecond {
			t.Errorf("the waiter got the slot %v after the release", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter did not get the released slot while another process had its file open")
	}
}

// A plain waiter and a semaphore's first grant that meet never leave the
// plain waiter queued behind the semaphore, in either order: a plain
// waiter that is about to wait (marked) keeps a semaphore out, and a plain
// waiter that meets a semaphore's grant under way (its shared flock taken,
// its record not yet written) fails at once with its limit.
func TestPlainWaiterAndASemaphoreNeverQueueBehindEachOther(t *testing.T) {
	b, _ := Open(t.TempDir())
	backendtest.MustAcquire(t, b, "k", opts("first")).Release(t.Context())
	waiter, err := os.OpenFile(b.path("k"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := markPlainWaiter(waiter); err != nil {
		t.Fatal(err)
	}
	var le *backend.LimitError
	if _, err := b.Acquire(t.Context(), "k", semOpts("sem", 2)); !errors.As(err, &le) || le.Have != 1 {
		t.Errorf("semaphore Acquire while a plain waiter is about to wait = %v, want a LimitError (have 1)", err)
	}
	waiter.Close()

	granting, err := os.OpenFile(b.path("k"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer granting.Close()
	if err := syscall.Flock(int(granting.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	written := make(chan struct{})
	defer func() { <-written }() // before granting is closed
	go func() {                  // the grant's record comes a little later
		defer close(written)
		time.Sleep(20 * time.Millisecond)
		last, slot, _ := readState(granting)
		writeState(granting, record{Token: last.Token + 1, RunID: "sem", Limit: 2}, slot)
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	o := opts("plain")
	o.Wait = true
	if _, err := b.Acquire(ctx, "k", o); !errors.As(err, &le) || le.Have != 2 {
		t.Errorf("plain waiting Acquire during a semaphore's first grant = %v, want a LimitError (have 2) at once", err)
	}
}
