package file

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/lockrun/lockrun/backend"
	"golang.org/x/sys/unix"
)

// SharedDir is the default lock directory, shared by every user of the
// machine so that their lockruns exclude each other; root creates it.
const SharedDir = "/var/lock/lockrun"

// OpenURL opens file:///abs/dir, or the default directory for "file:" or
// "file://" with no path.
func OpenURL(u *url.URL) (*Backend, error) {
	if u.Scheme != "file" {
		return nil, fmt.Errorf("%w: scheme %q is not file", backend.ErrInvalidURL, u.Scheme)
	}
	if u.Host != "" && u.Host != "localhost" {
		return nil, fmt.Errorf("%w: file URLs name a local directory, not host %q: use file:///dir", backend.ErrInvalidURL, u.Host)
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("%w: %q is a relative path: use file:///absolute/dir", backend.ErrInvalidURL, u.Opaque)
	}
	if u.Path == "" {
		return OpenDefault()
	}
	return Open(filepath.Clean(u.Path))
}

// DefaultDir is SharedDir when it is safe to share; otherwise the private
// per-user directory /tmp/lockrun-UID. The private one depends on nothing
// in the environment (not $XDG_RUNTIME_DIR, which a login shell has and
// cron has not, nor $TMPDIR), so that the same user's cron job and shell
// lock the same files.
func DefaultDir() string {
	if os.Geteuid() == 0 {
		if err := os.Mkdir(SharedDir, 0o755); err == nil {
			_ = os.Chmod(SharedDir, 0o777|os.ModeSticky)
		}
	}
	if trusted(SharedDir) {
		return SharedDir
	}
	return fmt.Sprintf("/tmp/lockrun-%d", os.Geteuid())
}

// OpenDefault opens the default directory. A private directory must be a
// real directory owned by this user: in /tmp anyone could have made it
// first, and locks kept there would be theirs to break.
func OpenDefault() (*Backend, error) {
	dir := DefaultDir()
	if dir == SharedDir {
		return Open(dir)
	}
	return openPrivate(dir)
}

// openPrivate opens dir, creating it, if it is a directory of this user's.
func openPrivate(dir string) (*Backend, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: lock directory: %w", backend.ErrUnavailable, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return nil, fmt.Errorf("%w: lock directory: %w", backend.ErrUnavailable, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%w: lock directory %s is not a directory owned by you: remove it, or choose one with --backend file:///dir", backend.ErrUnavailable, dir)
	}
	return &Backend{dir: dir}, nil
}

// trusted tells whether a shared directory can be used: a real directory
// (not a link) owned by root, sticky and world-writable like /tmp, so that
// users can add lock files but not remove or replace each other's. root
// creates SharedDir so when it is missing; one that anyone else made
// first is not trusted.
func trusted(dir string) bool {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false
	}
	const want = unix.S_IFDIR | unix.S_ISVTX | 0o777
	return st.Uid == 0 && st.Mode&(unix.S_IFMT|unix.S_ISVTX|0o777) == want && unix.Access(dir, unix.W_OK|unix.X_OK) == nil
}
