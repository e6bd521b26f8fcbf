package file

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// A semaphore of limit N keeps its holders in slot files beside the key's
// lock file, KEY.lock.slot-0 to KEY.lock.slot-(N-1): each is a lock file
// in every respect (created, verified and laid out as KEY.lock is), held
// with an exclusive flock by one holder for as long as that holder and its
// command live, with that holder's record, min-hold and revocation. The
// names cannot be taken for a key's lock file, which ends in ".lock".
func (b *Backend) slotPath(key string, i int) string {
	return b.path(key) + slotInfix + strconv.Itoa(i)
}

const slotInfix = ".slot-"

// slotState is what a scan saw of one slot file.
type slotState struct {
	i       int
	missing bool // no file yet: free
	flocked bool // someone holds its flock: taken, whatever the record says
	rec     record
	live    bool           // a holder that counts: flocked or within its min-hold, not revoked
	revoked bool           // a holder revoked by Revoke that still holds the flock: shown, not live
	hold    time.Duration  // min-hold left when only that keeps the slot taken
	status  backend.Status // the holder, when live or revoked
}

// taken reports whether a new holder cannot have the slot: someone holds
// its flock (a holder, one revoked that has not let go yet, or another
// program), or a min-hold keeps it.
func (s slotState) taken() bool { return s.flocked || s.live }

// scanSlots reads slots 0 to n-1 of key. It tells a flocked slot by
// trying its flock (exclusive, not waiting, dropped at once): that is
// exact, and cheap, where no grant can be under way (under the semaphore's
// mutex, see lockMutex, or the key's exclusive flock), and it costs no
// read of /proc/locks, which takes milliseconds on a loaded host. The
// probe opens the slot read-only, so that it wakes no waiter's watch.
func (b *Backend) scanSlots(key string, n int) ([]slotState, error) {
	return b.readSlots(key, n, probeFlock)
}

// peekSlots is scanSlots for Inspect, which takes no lock, not even for a
// moment (it could make a concurrent grant skip a free slot): the kernel's
// table of flocks says which slots are held.
func (b *Backend) peekSlots(key string, n int) ([]slotState, error) {
	table, err := flockedFiles()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
	}
	return b.readSlots(key, n, func(f *os.File) (bool, error) {
		id, err := fileID(f)
		return table[id], err
	})
}

// probeFlock reports whether someone else holds f's flock, taking it if
// not: closing f drops it.
func probeFlock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

func (b *Backend) readSlots(key string, n int, flocked func(*os.File) (bool, error)) ([]slotState, error) {
	slots := make([]slotState, n)
	for i := range slots {
		var err error
		if slots[i], err = b.readSlot(key, i, flocked); err != nil {
			return nil, err
		}
	}
	return slots, nil
}

func (b *Backend) readSlot(key string, i int, flocked func(*os.File) (bool, error)) (slotState, error) {
	s := slotState{i: i}
	f, err := b.openPath(b.slotPath(key, i), true, false)
	if errors.Is(err, errMissing) {
		s.missing = true
		return s, nil
	}
	if err != nil {
		return s, err
	}
	defer f.Close()
	rec, _, err := readState(f)
	if errors.Is(err, errForeign) {
		return s, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if err != nil {
		return s, fmt.Errorf("%w: reading %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	if s.flocked, err = flocked(f); err != nil {
		return s, fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	s.rec = rec
	if rec.RunID == "" {
		return s, nil
	}
	rev := readRevocation(f)
	revoked := rev.RunID == rec.RunID
	switch hold := rec.held(time.Now()); {
	case s.flocked && revoked && rev.Kept:
		s.revoked, s.status = true, holdStatus(key, rec, 0, f)
	case revoked:
	case s.flocked:
		s.live, s.status = true, holdStatus(key, rec, 0, f)
	case hold > 0:
		s.live, s.hold, s.status = true, hold, holdStatus(key, rec, hold, f)
	}
	return s, nil
}

// semStatus describes a semaphore's holders from its slots, oldest token
// first; free, with the last token issued, when it has none.
func (b *Backend) semStatus(key string, f *os.File, r record) (backend.Status, error) {
	slots, err := b.peekSlots(key, r.Limit)
	if err != nil {
		return backend.Status{Key: key}, err
	}
	return holdersStatus(key, r, slots), nil
}

// holdersStatus is the status of a semaphore of limit r.Limit whose
// slots are slots; r is the key's own record, the last grant. Revoked
// holders that still hold their slots are among its holders.
func holdersStatus(key string, r record, slots []slotState) backend.Status {
	var hs []backend.Status
	for _, s := range slots {
		if s.live || s.revoked {
			hs = append(hs, s.status)
		}
	}
	if len(hs) == 0 {
		return backend.Status{Key: key, Token: r.Token}
	}
	slices.SortFunc(hs, func(a, b backend.Status) int { return cmp.Compare(a.Token, b.Token) })
	st := hs[0]
	st.Limit, st.Holders = r.Limit, hs
	return st
}
