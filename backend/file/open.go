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

// openLock opens a key's lock file for reading and writing; read-only when
// readOnly. It never follows a symbolic link and accepts only a plain file
// with one name, so that a link planted in a shared directory cannot make
// lockrun write to, or change the mode of, another file. With create, a
// missing file is created exclusively (O_CREAT|O_EXCL|O_NOFOLLOW) with
// b.fileMode: a file someone else made is never truncated, padded or
// re-moded, only locked, and only when it is safe to (see trustFile).
func (b *Backend) openLock(key string, readOnly, create bool) (*os.File, error) {
	return b.openPath(b.path(key), readOnly, create)
}

// openPath opens path as openLock opens a key's lock file, with the same
// checks: a semaphore's slot files are lock files in every respect.
func (b *Backend) openPath(path string, readOnly, create bool) (*os.File, error) {
	flag := os.O_RDWR
	if readOnly {
		flag = os.O_RDONLY
	}
	for {
		// O_NONBLOCK: opening a FIFO planted in a shared directory
		// must not hang; it changes nothing for a plain file.
		f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err == nil {
			if err := b.trustFile(f, readOnly); err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, openError(path, err, readOnly)
		}
		if !create {
			return nil, errMissing
		}
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, os.FileMode(b.fileMode))
		if errors.Is(err, fs.ErrExist) {
			continue // another process created it first: open theirs
		}
		if err != nil {
			return nil, openError(path, err, false)
		}
		if err := f.Chmod(os.FileMode(b.fileMode)); err != nil { // undo a umask that would shut the group out
			f.Close()
			return nil, openError(path, err, false)
		}
		return f, nil
	}
}

// openError classifies a failed open: a refusal is ErrPermission (exit 77),
// since whoever cannot write a lock file may not take, release or revoke it.
func openError(path string, err error, readOnly bool) error {
	switch {
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%w: %s is a symbolic link: refusing to follow it", backend.ErrPermission, path)
	case errors.Is(err, fs.ErrPermission) && readOnly:
		return fmt.Errorf("%w: %s: you may not read this lock file", backend.ErrPermission, path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: %s: you may not write this lock file, so you may not take, release or revoke it", backend.ErrPermission, path)
	}
	return fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
}

// trustFile refuses anything but a regular file with a single link (a
// hard link would let a lock file alias a file of another purpose), and a
// lock file that someone outside the lock's users could change: one that
// all may write (this user's own is mended), or, in a directory where
// anyone may create files, one that belongs to another user, who could
// remove it while we hold it.
func (b *Backend) trustFile(f *os.File, readOnly bool) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink != 1 {
		return fmt.Errorf("%w: %s is not a plain lock file (a device, a directory or a hard link): refusing to use it", backend.ErrPermission, f.Name())
	}
	mine := int(st.Uid) == os.Geteuid()
	switch {
	case readOnly:
		return nil
	case st.Mode&syscall.S_IWOTH != 0 && mine:
		return f.Chmod(os.FileMode(b.fileMode))
	case st.Mode&syscall.S_IWOTH != 0:
		return fmt.Errorf("%w: %s is writable by every user, so it is not a lock file you can trust: its owner (uid %d) should remove it", backend.ErrPermission, f.Name(), st.Uid)
	case b.open && !mine && st.Uid != 0:
		return fmt.Errorf("%w: %s belongs to uid %d, who could remove it while you hold it: use a directory shared with a group (see the file backend's docs)", backend.ErrPermission, f.Name(), st.Uid)
	}
	return nil
}
