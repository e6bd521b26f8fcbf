package file

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/backend"
)

// The lock file holds the key's state in place, so that it works in a
// shared sticky directory such as /var/lock, where a user may not rename
// over another user's file. Two record slots alternate: a crash while one is
// written leaves the other, older one intact, and a checksum tells a torn
// slot from a good one. A third slot names a run that ForceRelease revoked.
const (
	slotSize    = 512
	revokedSlot = 2
	fileSize    = 3 * slotSize
)

// record is what one acquisition writes; the token is the fencing token.
// HoldUntil keeps the key taken after the flock ends (AcquireOptions.MinHold):
// it is fixed at the grant, so that a holder that crashes holds no longer.
type record struct {
	Token     backend.Token       `json:"token"`
	Holder    string              `json:"holder,omitempty"`
	RunID     string              `json:"run_id"`
	PID       int                 `json:"pid,omitempty"`
	Since     int64               `json:"since_unix_ms,omitempty"`
	HoldUntil int64               `json:"hold_until_unix_ms,omitempty"`
	MinHold   int64               `json:"min_hold_ms,omitempty"`
	Info      *backend.HolderInfo `json:"info,omitempty"`
	// Limit is the semaphore's limit when the grant was one of up to Limit
	// holders (more than 1); absent for a plain lock, as older lockruns
	// wrote every record.
	Limit int `json:"limit,omitempty"`
}

// held reports how long the record's min-hold keeps the key taken after
// its flock ended: never longer than the min-hold itself from now, so that
// a clock stepped back cannot stretch it.
func (r record) held(now time.Time) time.Duration {
	left := time.UnixMilli(r.HoldUntil).Sub(now)
	return max(0, min(left, time.Duration(r.MinHold)*time.Millisecond))
}

// fit shortens the holder's details until the record fits its slot: the
// token and run id must be kept whole, a long command line need not.
func (r *record) fit() ([]byte, error) {
	for {
		b, err := encodeSlot(*r)
		if err == nil || r.Info == nil {
			return b, err
		}
		i := *r.Info
		switch {
		case len(i.Command) > 16:
			i.Command = truncate(i.Command, len(i.Command)/2)
		case len(i.CIURL) > 16:
			i.CIURL = truncate(i.CIURL, len(i.CIURL)/2)
		case len(i.User) > 16:
			i.User = truncate(i.User, 16)
		default:
			r.Info = nil
			continue
		}
		r.Info = &i
	}
}

// truncate cuts s to at most n bytes on a UTF-8 boundary, marking the cut.
func truncate(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

var errTorn = errors.New("torn or empty slot")

// encodeSlot renders v as JSON, a space, its CRC-32 in hex and a newline,
// padded with NULs to the slot size.
func encodeSlot(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b = fmt.Appendf(b, " %08x\n", crc32.ChecksumIEEE(b))
	if len(b) > slotSize {
		return nil, fmt.Errorf("record of %d bytes does not fit a %d-byte slot", len(b), slotSize)
	}
	return append(b, make([]byte, slotSize-len(b))...), nil
}

func decodeSlot(b []byte, v any) error {
	b = bytes.TrimRight(b, "\x00")
	i := bytes.LastIndexByte(b, ' ')
	if i < 0 || len(b) != i+10 || b[len(b)-1] != '\n' {
		return errTorn
	}
	sum, err := strconv.ParseUint(string(b[i+1:len(b)-1]), 16, 32)
	if err != nil || uint32(sum) != crc32.ChecksumIEEE(b[:i]) {
		return errTorn
	}
	return json.Unmarshal(b[:i], v)
}

// errForeign means a file holds something other than lockrun's records:
// it is never written to.
var errForeign = fmt.Errorf("%w: not a lockrun lock file (it holds other data): refusing to change it; remove it if it is stale", backend.ErrPermission)

// readState returns the newest good record and the slot it is in; a file
// with no good record yields the zero record and slot -1.
func readState(f *os.File) (record, int, error) {
	buf := make([]byte, fileSize+1)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return record{}, -1, err
	}
	if !ownFile(buf[:n]) {
		return record{}, -1, errForeign
	}
	best, slot := record{}, -1
	for i := 0; i < 2; i++ {
		var r record
		if (i+1)*slotSize > n || decodeSlot(buf[i*slotSize:(i+1)*slotSize], &r) != nil {
			continue
		}
		if slot < 0 || r.Token > best.Token {
			best, slot = r, i
		}
	}
	return best, slot, nil
}

// ownFile tells lockrun's lock files, which may be written, from files of
// another purpose: empty (as new, or made by flock(1)), or no longer than
// lockrun's layout with a good record in one of its slots.
func ownFile(b []byte) bool {
	if len(bytes.Trim(b, "\x00")) == 0 {
		return true
	}
	if len(b) > fileSize {
		return false
	}
	var v map[string]any
	for i := 0; i*slotSize < len(b); i++ {
		if decodeSlot(b[i*slotSize:min(len(b), (i+1)*slotSize)], &v) == nil {
			return true
		}
	}
	return false
}

// writeState writes r over the older slot and syncs it to disk, so that
// the counter survives crashes and reboots.
func writeState(f *os.File, r record, newest int) error {
	return writeRecord(f, r, newest, true)
}

// writeRecord is writeState, syncing only when sync says so.
func writeRecord(f *os.File, r record, newest int, sync bool) error {
	b, err := r.fit()
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, int64(slotSize*(1-max(newest, 0)))); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	return syncData(f)
}

// syncData makes what was written to f durable: fdatasync(2), which
// writes the data and what reading it back needs (the size of a file that
// grew), and not the mtime as well, whose journal commit fsync(2) would
// add to every grant on the way to the command.
func syncData(f *os.File) error {
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}

// revocation names the run revoked. Kept says that Revoke wrote it, not
// ForceRelease or ReleaseHolder: a semaphore holder so revoked is still
// shown among the holders, Revoked, while it holds its slot's flock. An
// older lockrun reads the run id alone, and is revoked as by ForceRelease.
type revocation struct {
	RunID string `json:"revoked_run_id"`
	Kept  bool   `json:"kept_until_released,omitempty"`
}

// readRevoked is the run id of f's revocation record; "" when it has none
// (a file written before any revocation, or by an older lockrun).
func readRevoked(f *os.File) string { return readRevocation(f).RunID }

func readRevocation(f *os.File) revocation {
	buf := make([]byte, slotSize)
	if _, err := f.ReadAt(buf, revokedSlot*slotSize); err != nil && !errors.Is(err, io.EOF) {
		return revocation{}
	}
	var r revocation
	if decodeSlot(buf, &r) != nil {
		return revocation{}
	}
	return r
}

func writeRevoked(f *os.File, r revocation) error {
	b, err := encodeSlot(r)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, revokedSlot*slotSize); err != nil {
		return err
	}
	return syncData(f)
}
