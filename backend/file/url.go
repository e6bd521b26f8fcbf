package file

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/lockrun/lockrun/backend"
	"golang.org/x/sys/unix"
)

// SharedDir is the default lock directory: on tmpfs, shared by every user
// of the machine, so that their lockruns exclude each other.
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
		return Open(DefaultDir())
	}
	return Open(filepath.Clean(u.Path))
}

// DefaultDir is SharedDir when this user can use it; else a per-user
// directory: $XDG_RUNTIME_DIR/lockrun, or lockrun-UID in the temp dir.
func DefaultDir() string {
	if shared() {
		return SharedDir
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "lockrun")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("lockrun-%d", os.Geteuid()))
}

// shared makes SharedDir usable by everyone if it can: world-writable and
// sticky like /tmp, so that users can add lock files but not remove
// each other's.
func shared() bool {
	if unix.Access(SharedDir, unix.W_OK|unix.X_OK) == nil {
		return true
	}
	if err := os.Mkdir(SharedDir, 0o755); err != nil {
		return false
	}
	return os.Chmod(SharedDir, 0o777|os.ModeSticky) == nil
}
