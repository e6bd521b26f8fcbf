package file

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/lockrun/lockrun/backend"
)

// errMissing means the key's lock file does not exist: it was never taken.
var errMissing = errors.New("no lock file")

// openLock opens a lock file for reading and writing; read-only when
// readOnly. It never follows a symbolic link and accepts only a plain file
// with one name, so that a link planted in a shared directory cannot make
// lockrun write to, or change the mode of, another file. With create, a
// missing file is created (exclusively, so a file someone else made is
// never touched but to lock it) and made readable and writable by all: in a
// shared directory other users must be able to lock it too.
func openLock(path string, readOnly, create bool) (*os.File, error) {
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	for {
		// O_NONBLOCK: opening a FIFO planted in a shared directory
		// must not hang; it changes nothing for a plain file.
		f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err == nil {
			if err := plainFile(f); err != nil {
				return nil, err
			}
			return f, nil
		}
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symbolic link: refusing to follow it", backend.ErrUnavailable, path)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
		}
		if !create {
			return nil, errMissing
		}
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue // another process created it first: open theirs
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
		}
		if err := f.Chmod(0o666); err != nil { // undo our umask
			f.Close()
			return nil, fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
		}
		return f, nil
	}
}

// plainFile refuses, and closes, anything but a regular file with a single
// link: a hard link would let a lock file alias a file of another purpose.
func plainFile(f *os.File) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink != 1 {
		f.Close()
		return fmt.Errorf("%w: %s is not a plain lock file (a device, a directory or a hard link): refusing to use it", backend.ErrUnavailable, f.Name())
	}
	return nil
}
