// Package randtext makes random names (run ids, temporary files, sockets)
// from the kernel's getrandom(2), without crypto/rand.
//
// crypto/rand brings in the FIPS 140 module, whose package initialisation
// (self-tests' tables, SHA-2, AES-GCM, a DRBG) every lockrun start and
// every watchdog would pay for a few random names: about 0.15 ms of a
// start on a slow host. getrandom(2) is what crypto/rand reads on Linux.
package randtext

import (
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// textBytes is what Text encodes: 128 bits, as crypto/rand.Text.
const textBytes = 16

// encoding is crypto/rand.Text's alphabet: upper case base32, no padding.
var encoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// Text returns 26 characters of upper case base32 that encode 128 random
// bits from the kernel's CSPRNG, as crypto/rand.Text does.
func Text() (string, error) {
	b := make([]byte, textBytes)
	if err := read(b); err != nil {
		return "", fmt.Errorf("reading random bytes: %w", err)
	}
	return encoding.EncodeToString(b), nil
}

// read fills b from getrandom(2), or from /dev/urandom on a kernel older
// than 3.17, which has no getrandom.
func read(b []byte) error {
	for len(b) > 0 {
		n, err := unix.Getrandom(b, 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSYS):
			return readDevice(b)
		case err != nil:
			return err
		}
		b = b[n:]
	}
	return nil
}

func readDevice(b []byte) error {
	f, err := os.Open("/dev/urandom")
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.ReadFull(f, b)
	return err
}
