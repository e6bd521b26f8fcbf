package runner

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/internal/randtext"
)

// cgroup is a cgroup v2 of the command's own. A process cannot leave it
// (setsid, double forks and re-parenting do not matter), and writing
// cgroup.kill kills everything in it at once, so the watchdog can still
// reach every descendant after lockrun itself was SIGKILLed. lockrun makes
// one below its own cgroup when it may (root, or a delegated subtree);
// otherwise the process group and the subreaper are what it has.
type cgroup struct {
	dir string
	fd  int // the directory, for CLONE_INTO_CGROUP
}

// newCgroup makes an empty cgroup next to lockrun's own processes, or
// says why the command will not be contained in one: no cgroup v2, no
// right to make one, or a kernel without cgroup.kill (before 5.14), whose
// cgroups cannot be killed at once.
func newCgroup() (*cgroup, error) {
	parent, err := ownCgroup()
	if err != nil {
		return nil, err
	}
	// Named for the lockrun that made it, so that an operator (or a test)
	// can tell whose it is: lockrun-PID-RANDOM.
	suffix, err := randtext.Text()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(parent, fmt.Sprintf("lockrun-%d-%s", os.Getpid(), strings.ToLower(suffix[:8])))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.kill")); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("the kernel's cgroups have no cgroup.kill (Linux 5.14): %w", err)
	}
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(dir)
		return nil, err
	}
	return &cgroup{dir: dir, fd: fd}, nil
}

// ownCgroup is the directory of this process's cgroup in the cgroup v2
// hierarchy, from /proc/self/cgroup ("0::/path") and /proc/self/mountinfo.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var path string
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			path = p
		}
	}
	if path == "" {
		return "", errors.New("no cgroup v2 hierarchy")
	}
	mount, root, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("cgroup %s is outside the mounted hierarchy", path)
	}
	return filepath.Join(mount, rel), nil
}

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted, and which of
// its directories the mount shows.
func cgroup2Mount() (mount, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw"
		fields := strings.Fields(sc.Text())
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 {
				return fields[4], fields[3], nil
			}
		}
	}
	return "", "", errors.New("cgroup v2 is not mounted")
}

// kill kills every process in the cgroup.
func (c *cgroup) kill() error {
	return os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
}

// remove deletes the cgroup once it is empty, waiting a little for the
// killed to finish dying.
func (c *cgroup) remove() {
	_ = unix.Close(c.fd)
	for i := 0; i < 100; i++ {
		if err := unix.Rmdir(c.dir); err == nil || errors.Is(err, unix.ENOENT) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
