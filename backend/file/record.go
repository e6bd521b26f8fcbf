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
type record struct {
	Token  backend.Token `json:"token"`
	Holder string        `json:"holder,omitempty"`
	RunID  string        `json:"run_id"`
	PID    int           `json:"pid,omitempty"`
	Since  int64         `json:"since_unix_ms,omitempty"`
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

// readState returns the newest good record and the slot it is in; a file
// with no good record yields the zero record and slot -1.
func readState(f *os.File) (record, int, error) {
	buf := make([]byte, 2*slotSize)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return record{}, -1, err
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

// writeState writes r over the older slot and syncs it to disk, so that
// the counter survives crashes and reboots.
func writeState(f *os.File, r record, newest int) error {
	b, err := encodeSlot(r)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, int64(slotSize*(1-max(newest, 0)))); err != nil {
		return err
	}
	return f.Sync()
}

type revocation struct {
	RunID string `json:"revoked_run_id"`
}

func readRevoked(f *os.File) string {
	buf := make([]byte, slotSize)
	if _, err := f.ReadAt(buf, revokedSlot*slotSize); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	var r revocation
	if decodeSlot(buf, &r) != nil {
		return ""
	}
	return r.RunID
}

func writeRevoked(f *os.File, runID string) error {
	b, err := encodeSlot(revocation{RunID: runID})
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, revokedSlot*slotSize); err != nil {
		return err
	}
	return f.Sync()
}
