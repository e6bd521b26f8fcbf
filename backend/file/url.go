package file

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/lockrun/lockrun/backend"
)

// RootDir is root's default lock directory: in /run, where no one else can
// make it first, like a systemd runtime directory.
const RootDir = "/run/lockrun"

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

// DefaultDir is this user's own lock directory: /run/lockrun for root,
// /tmp/lockrun-UID for everyone else. It depends on nothing but the user:
// not on who else ran lockrun, nor on the environment ($XDG_RUNTIME_DIR,
// which a login shell has and cron has not, or $TMPDIR), so that every run
// of one user, from cron or a shell, locks the same files. Users exclude
// each other only in a directory they share on purpose (see Open).
func DefaultDir() string {
	if os.Geteuid() == 0 {
		return RootDir
	}
	return fmt.Sprintf("/tmp/lockrun-%d", os.Geteuid())
}

// OpenDefault opens DefaultDir, creating it (0700) when missing. It must be
// a real directory of this user's that no one else may write to: in /tmp
// anyone could have made it first, and locks kept there would be theirs to
// break. Otherwise the error wraps backend.ErrPermission.
func OpenDefault() (*Backend, error) {
	d, err := verifyDir(DefaultDir(), true)
	if err != nil {
		return nil, err
	}
	if err := privateOK(d); err != nil {
		return nil, err
	}
	return newBackend(d), nil
}
