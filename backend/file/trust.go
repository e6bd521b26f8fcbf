package file

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/backend"
)

// maxLinks bounds the symbolic links followed on one path, as the kernel's
// ELOOP does.
const maxLinks = 32

// dirInfo is what the trust check learned about a verified lock directory.
type dirInfo struct {
	path string // the real path: no symbolic link left in it
	st   unix.Stat_t
}

// untrusted is the one-line refusal of a directory that someone other than
// root or this user could change; lockrun exits 77 with it.
func untrusted(path, why string) error {
	return fmt.Errorf("%w: lock directory %s is not safe to use: %s", backend.ErrPermission, path, why)
}

// verifyDir checks a lock directory the way systemd checks a runtime
// directory and OpenSSH a key file's path: every directory on the way,
// and every symbolic link followed, belongs to root or to this user, and
// none can be renamed or replaced by someone else (a directory writable by
// others must be sticky, and what we pass through in it must be ours or
// root's). With create, missing directories are made (the last one 0700,
// those above it 0755), each checked as it is made. It returns the real
// path; the rules for the last directory itself are the caller's.
func verifyDir(path string, create bool) (dirInfo, error) {
	links := 0
	return walk(filepath.Clean(path), create, &links)
}

func walk(path string, create bool, links *int) (dirInfo, error) {
	cur := dirInfo{path: "/"}
	if err := unix.Stat("/", &cur.st); err != nil {
		return cur, fmt.Errorf("%w: /: %w", backend.ErrUnavailable, err)
	}
	if err := ancestorOK(cur); err != nil {
		return cur, err
	}
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	for i, name := range parts {
		if name == "" {
			continue
		}
		next := dirInfo{path: filepath.Join(cur.path, name)}
		last := i == len(parts)-1
		if err := lstatOrCreate(&next, last, create); err != nil {
			return next, err
		}
		if writableByOthers(cur.st) && !ours(next.st) {
			return next, untrusted(path, fmt.Sprintf("%s belongs to uid %d, in %s where others may create files", next.path, next.st.Uid, cur.path))
		}
		switch next.st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if *links++; *links > maxLinks {
				return next, untrusted(path, "too many symbolic links")
			}
			target, err := os.Readlink(next.path)
			if err != nil {
				return next, fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(cur.path, target)
			}
			return walk(filepath.Join(append([]string{target}, parts[i+1:]...)...), create, links)
		case unix.S_IFDIR:
		default:
			return next, untrusted(path, next.path+" is not a directory")
		}
		if !last {
			if err := ancestorOK(next); err != nil {
				return next, err
			}
		}
		cur = next
	}
	return cur, nil
}

// lstatOrCreate fills d.st, making the directory when it is missing and
// create says so.
func lstatOrCreate(d *dirInfo, last, create bool) error {
	err := unix.Lstat(d.path, &d.st)
	if errors.Is(err, fs.ErrNotExist) && create {
		mode := uint32(0o755)
		if last {
			mode = 0o700
		}
		if err = unix.Mkdir(d.path, mode); err == nil || errors.Is(err, fs.ErrExist) {
			err = unix.Lstat(d.path, &d.st) // made by us, or by whoever was first: checked all the same
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: lock directory %s: %w", backend.ErrPermission, d.path, err)
	}
	return fmt.Errorf("%w: lock directory %s: %w", backend.ErrUnavailable, d.path, err)
}

// ancestorOK: a directory above the lock directory belongs to root or to
// us, and only a sticky one may be writable by others (as /tmp).
func ancestorOK(d dirInfo) error {
	if !ours(d.st) {
		return untrusted(d.path, fmt.Sprintf("it belongs to uid %d, not to you or root", d.st.Uid))
	}
	if writableByOthers(d.st) && d.st.Mode&unix.S_ISVTX == 0 {
		return untrusted(d.path, "others may write to it and it is not sticky (chmod +t or o-w)")
	}
	return nil
}

// sharedOK is the rule for a lock directory that users share: owned by
// root or by us; writable by a group only with setgid, so that every lock
// file in it belongs to that group; writable by all only when sticky.
func sharedOK(d dirInfo) error {
	switch m := d.st.Mode; {
	case !ours(d.st):
		return untrusted(d.path, fmt.Sprintf("it belongs to uid %d, not to you or root", d.st.Uid))
	case m&unix.S_IWOTH != 0 && m&unix.S_ISVTX == 0:
		return untrusted(d.path, "anyone may write to it and it is not sticky: share it with a group instead (chmod 3770, see the file backend's docs)")
	case m&unix.S_IWGRP != 0 && m&unix.S_ISGID == 0 && m&unix.S_IWOTH == 0:
		return untrusted(d.path, "it is group-writable without setgid: chmod g+s (3770) so that its lock files belong to the group")
	}
	return nil
}

// privateOK is the rule for a user's default directory: ours, and
// writable by no one else.
func privateOK(d dirInfo) error {
	if int(d.st.Uid) != os.Geteuid() {
		return untrusted(d.path, fmt.Sprintf("it belongs to uid %d, not to you: remove it (someone else made it first), or choose one with --backend file:///dir", d.st.Uid))
	}
	if d.st.Mode&(unix.S_IWGRP|unix.S_IWOTH) != 0 {
		return untrusted(d.path, "others may write to it: chmod 700 it")
	}
	return nil
}

func ours(st unix.Stat_t) bool { return st.Uid == 0 || int(st.Uid) == os.Geteuid() }

func writableByOthers(st unix.Stat_t) bool { return st.Mode&(unix.S_IWGRP|unix.S_IWOTH) != 0 }
