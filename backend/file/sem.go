package file

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// A semaphore's holders and waiters each keep a shared flock on the key's
// lock file for as long as they hold or wait, where a plain holder keeps
// an exclusive one: the kernel itself keeps a plain lock and a semaphore
// apart, atomically, and a SIGKILLed holder's share lasts until its
// command is dead, as a plain holder's flock does. Under the shared flock,
// grants take turns on the key's semaphore mutex (queue.go), and issue
// the key's one token counter, in the lock file's own record, so that a
// plain lock and a semaphore of the key go on from each other's tokens.

// acquireSem is Acquire for a limit above 1.
func (b *Backend) acquireSem(ctx context.Context, key string, o backend.AcquireOptions) (backend.Lease, error) {
	for {
		kf, err := b.shareKey(key, o.EffectiveLimit())
		if err != nil {
			return nil, err
		}
		if kf == nil {
			continue // the lock file was replaced: share the one the path names now
		}
		l, err := b.semWait(ctx, key, kf, o)
		if l == nil {
			_ = syscall.Flock(int(kf.Fd()), syscall.LOCK_UN) // even if an abandoned wait still has it open
			kf.Close()
			return nil, err
		}
		return l, nil
	}
}

// shareKey opens key's lock file and takes its shared flock, or says why
// not: a plain lock holds it, or waits for it in flock(2) (a *LimitError),
// or a program that is not lockrun holds it (a *HeldError). A nil file and
// nil error mean that the path no longer names the file opened.
func (b *Backend) shareKey(key string, want int) (*os.File, error) {
	kf, err := b.openLock(key, false, true)
	if err != nil {
		return nil, err
	}
	if err := b.share(key, kf, want); err != nil {
		kf.Close()
		return nil, err
	}
	ok, err := named(kf, kf.Name())
	if err == nil && ok {
		// A plain waiter, of this lockrun (marked) or another program
		// (queued in flock(2)), makes the key a plain lock's.
		var waits bool
		waits, err = plainWaits(kf)
		if err == nil && !waits {
			waits, err = writerWaits(kf)
		}
		if err == nil && waits {
			err = &backend.LimitError{Key: key, Want: want, Have: 1}
		}
	}
	if err == nil && ok {
		return kf, nil
	}
	_ = syscall.Flock(int(kf.Fd()), syscall.LOCK_UN)
	kf.Close()
	if err != nil && !errors.Is(err, backend.ErrLimitMismatch) {
		err = fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, kf.Name(), err)
	}
	return nil, err
}

// share takes kf's shared flock. The exclusive flock that stops it is a
// plain holder's, or, while the key's record is a semaphore's, most
// likely a plain acquirer's that is looking at the semaphore's slots and
// lets go within milliseconds: that one is waited out, a little.
func (b *Backend) share(key string, kf *os.File, want int) error {
	for i := 0; ; i++ {
		err := syscall.Flock(int(kf.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%w: locking %s: %w", backend.ErrUnavailable, kf.Name(), err)
		}
		if r, _, err := readState(kf); err == nil && r.Limit > 1 && i < 50 {
			time.Sleep(2 * time.Millisecond)
			continue
		}
		st, _ := b.status(key, kf)
		if st.Held && st.RunID == "" {
			return &backend.HeldError{Status: st}
		}
		return &backend.LimitError{Key: key, Want: want, Have: 1}
	}
}

// semWait takes a slot of key, holding kf's shared flock, waiting in the
// queue when o.Wait says so. It returns a nil lease with the reason.
func (b *Backend) semWait(ctx context.Context, key string, kf *os.File, o backend.AcquireOptions) (*lease, error) {
	var (
		t *ticket
		w *slotWatch
	)
	defer func() { t.leave(); w.close() }()
	for {
		if err := lockMutex(ctx, kf); err != nil {
			return nil, err
		}
		turn, err := b.semTry(key, kf, o, t != nil)
		if err == nil && turn.lease == nil && o.Wait && t == nil {
			t, err = b.takeTicket(kf)
		}
		unlockMutex(kf)
		switch {
		case err != nil:
			return nil, err
		case turn.lease != nil:
			return turn.lease, nil
		case !o.Wait:
			return nil, &backend.HeldError{Status: turn.full}
		case w == nil: // at the end of the queue: wait to be first, then watch the slots
			if err := t.waitTurn(ctx); err != nil {
				return nil, err
			}
			w = b.watchSlots(key)
			continue
		}
		if err := w.wait(ctx, turn.hold); err != nil {
			return nil, err
		}
	}
}

// semTurn is what one look at a semaphore found: a lease granted, or the
// status of a full semaphore and, when a min-hold is what fills it, how
// long until the first one ends.
type semTurn struct {
	lease *lease
	full  backend.Status
	hold  time.Duration
}

// semTry grants a slot of key if one is free, under the mutex. first says
// that the caller is the first of the queue; anyone else leaves the slots
// to the queue while it is not empty.
func (b *Backend) semTry(key string, kf *os.File, o backend.AcquireOptions, first bool) (semTurn, error) {
	want := o.EffectiveLimit()
	last, slot, err := readState(kf)
	if errors.Is(err, errForeign) {
		return semTurn{}, fmt.Errorf("%s: %w", kf.Name(), err)
	}
	if err != nil {
		return semTurn{}, fmt.Errorf("%w: reading %s: %w", backend.ErrUnavailable, kf.Name(), err)
	}
	have := 0 // no semaphore holder can be alive: the last grant was plain
	if last.Limit > 1 {
		have = last.Limit
	} else if last.held(time.Now()) > 0 && readRevoked(kf) != last.RunID {
		return semTurn{}, &backend.LimitError{Key: key, Want: want, Have: 1} // a plain lock's min-hold
	}
	slots, err := b.scanSlots(key, have)
	if err != nil {
		return semTurn{}, err
	}
	queued, err := waiting(kf)
	if err != nil {
		return semTurn{}, err
	}
	if have != want {
		// The key's holders and waiters all have the limit of its last
		// grant: it changes only when none is left.
		if queued && !first || anyTaken(slots) {
			return semTurn{}, &backend.LimitError{Key: key, Want: want, Have: max(have, 1)}
		}
		last.Limit = want
		if slots, err = b.scanSlots(key, want); err != nil {
			return semTurn{}, err
		}
	}
	turn := semTurn{full: holdersStatus(key, last, slots)}
	i, held := pick(slots, o.RunID)
	switch {
	case held: // this run holds a slot already: a retry takes no second one
		return turn, &backend.HeldError{Status: turn.full}
	case queued && !first || i < 0:
		turn.hold = firstHoldEnd(slots)
		return turn, nil
	}
	l, err := b.grantSlot(key, kf, i, last, slot, o)
	turn.lease = l
	return turn, err
}

func anyTaken(slots []slotState) bool {
	for _, s := range slots {
		if s.taken() {
			return true
		}
	}
	return false
}

// pick chooses the slot for run: the one its own min-hold keeps (a retry
// of its grant), else the first free one; -1 when none is. held reports
// that run holds a slot's flock already.
func pick(slots []slotState, run string) (i int, held bool) {
	i = -1
	for _, s := range slots {
		switch {
		case s.rec.RunID == run && s.flocked:
			return -1, true
		case s.rec.RunID == run && s.live:
			return s.i, false
		case i < 0 && !s.taken():
			i = s.i
		}
	}
	return i, false
}

// firstHoldEnd is how long until the first min-hold of slots ends; 0 when
// none keeps a slot.
func firstHoldEnd(slots []slotState) time.Duration {
	var first time.Duration
	for _, s := range slots {
		if !s.flocked && s.hold > 0 && (first == 0 || s.hold < first) {
			first = s.hold
		}
	}
	return first
}

// grantSlot makes run the holder of slot i, under the mutex: it flocks the
// slot file, issues the next token into the key's own record (last, in
// its slot ks), synced, and then writes the holder's record into the slot
// file. The counter comes first: a crash between the two wastes a token,
// and never issues one twice. The holder's record is synced only when it
// has a min-hold, the one part of it that must outlive a crash of the
// machine (which ends every holder).
func (b *Backend) grantSlot(key string, kf *os.File, i int, last record, ks int, o backend.AcquireOptions) (*lease, error) {
	if last.Token == math.MaxUint64 {
		return nil, fmt.Errorf("%w: %s: the token counter is at its limit (%d): no higher token can be issued", backend.ErrUnavailable, kf.Name(), last.Token)
	}
	sf, err := b.openPath(b.slotPath(key, i), false, true)
	if err != nil {
		return nil, err
	}
	l, err := b.fillSlot(kf, sf, last, ks, o)
	if err != nil {
		sf.Close()
		return nil, err
	}
	return l, nil
}

// fillSlot is grantSlot's work on the open slot file sf. The lease starts
// just before the slot's flock, as a plain lease starts just before the
// flock that succeeded: not when a waiter began to wait.
func (b *Backend) fillSlot(kf, sf *os.File, last record, ks int, o backend.AcquireOptions) (*lease, error) {
	start := time.Now()
	if err := syscall.Flock(int(sf.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return nil, fmt.Errorf("%w: locking %s: %w", backend.ErrUnavailable, sf.Name(), err)
	}
	ok, err := named(sf, sf.Name())
	if err == nil && !ok {
		err = errors.New("replaced while it was opened")
	}
	var ss int
	if err == nil {
		_, ss, err = readState(sf)
	}
	if err != nil {
		if errors.Is(err, errForeign) {
			return nil, fmt.Errorf("%s: %w", sf.Name(), err)
		}
		return nil, fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, sf.Name(), err)
	}
	now := time.Now()
	r := newRecord(max(last.Token+1, backend.ClockToken(now)), o, now)
	r.Limit = last.Limit
	counter := record{Token: r.Token, RunID: r.RunID, PID: r.PID, Since: r.Since, Limit: r.Limit}
	if err := writeState(kf, counter, ks); err != nil {
		return nil, fmt.Errorf("%w: writing %s: %w", backend.ErrUnavailable, kf.Name(), err)
	}
	if err := writeRecord(sf, r, ss, r.HoldUntil > 0); err != nil {
		return nil, fmt.Errorf("%w: writing %s: %w", backend.ErrUnavailable, sf.Name(), err)
	}
	return &lease{f: sf, path: sf.Name(), key: kf, keyPath: kf.Name(), rec: r, ttl: o.TTL, start: start, handedOn: &b.handedOn}, nil
}
