package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/lockrun/lockrun/backend"
	"golang.org/x/sys/unix"
)

// Inspect reads the key's record and asks the kernel whether anyone holds
// the flock, without taking it: a test lock could make a concurrent
// acquirer see a busy lock that is in fact free.
func (b *Backend) Inspect(ctx context.Context, key string) (backend.Status, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Status{}, err
	}
	f, err := openLock(b.path(key), true, false)
	if errors.Is(err, errMissing) {
		return backend.Status{Key: key}, nil
	}
	if err != nil {
		return backend.Status{}, err
	}
	defer f.Close()
	return b.status(key, f)
}

func (b *Backend) status(key string, f *os.File) (backend.Status, error) {
	r, _, err := readState(f)
	if err != nil {
		return backend.Status{Key: key}, fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
	}
	held, err := flocked(f)
	if err != nil {
		return backend.Status{Key: key}, fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
	}
	st := backend.Status{Key: key, Held: held, Token: r.Token}
	if held {
		st.Holder, st.RunID = r.Holder, r.RunID
	}
	return st, nil
}

// ForceRelease revokes the current holder's run: its next renewal reports
// ErrLost, it stops its command and drops the flock. The token is left as
// is, so the next holder's is higher.
func (b *Backend) ForceRelease(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	f, err := openLock(b.path(key), false, false)
	if errors.Is(err, errMissing) {
		return nil // never taken: nothing to break
	}
	if err != nil {
		return err
	}
	defer f.Close()
	// Read without the flock, the holder's record can be the previous
	// run's when a grant is being written meanwhile: revoke until the
	// record read after the revocation names the run revoked.
	revoked := ""
	for range 100 {
		st, err := b.status(key, f)
		if err != nil || !st.Held || st.RunID == revoked {
			return err
		}
		if err := writeRevoked(f, st.RunID); err != nil {
			return fmt.Errorf("%w: revoking %s: %w", backend.ErrUnavailable, f.Name(), err)
		}
		revoked = st.RunID
	}
	return fmt.Errorf("%w: revoking %s: its holder keeps changing", backend.ErrUnavailable, f.Name())
}

// flocked reports whether a flock is held on f's file, from /proc/locks,
// whose lines read "1: FLOCK  ADVISORY  WRITE 1234 00:2a:5678 0 EOF"
// (blocked waiters have "->" after the number).
func flocked(f *os.File) (bool, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return false, err
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return false, err
	}
	defer locks.Close()
	sc := bufio.NewScanner(locks)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[1] != "FLOCK" {
			continue
		}
		if fields[5] == want {
			return true, nil
		}
	}
	return false, sc.Err()
}
