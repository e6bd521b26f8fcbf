// Package usertest creates real unprivileged users and groups for tests of
// what one local user can do to another's locks, and runs commands as
// them. It needs root: without root a test skips with one line, unless CI
// is set, where it fails.
package usertest

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// User is a user created for one test and removed after it.
type User struct {
	Name     string
	UID, GID uint32
	Groups   []uint32 // supplementary groups
}

// Require skips t when not root and CI is unset, and fails it when CI is
// set and not root: multi-user tests must run in CI.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatal("multi-user tests need root (useradd) and CI is set")
	}
	t.Skip("multi-user test: needs root to create users (run make test as root)")
}

// name is a fresh user or group name: "lrt" and 10 random hex digits.
func name() string {
	b := make([]byte, 5)
	rand.Read(b)
	return fmt.Sprintf("lrt%x", b)
}

// Group creates a group, removed when t ends, and returns its name and gid.
func Group(t testing.TB) (string, uint32) {
	t.Helper()
	Require(t)
	n := name()
	run(t, "groupadd", n)
	t.Cleanup(func() { retry("groupdel", n) })
	g, err := user.LookupGroup(n)
	if err != nil {
		t.Fatal(err)
	}
	gid, _ := strconv.ParseUint(g.Gid, 10, 32)
	return n, uint32(gid)
}

// New creates a user with its own group and no home, a member of groups
// (names from Group), removed when t ends.
func New(t testing.TB, groups ...string) *User {
	t.Helper()
	Require(t)
	n := name()
	args := []string{"-M", "-U", "-s", "/bin/sh"}
	for _, g := range groups {
		args = append(args, "-G", g)
	}
	run(t, "useradd", append(args, n)...)
	t.Cleanup(func() { retry("userdel", n) })
	u, err := user.Lookup(n)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	us := &User{Name: n, UID: uint32(uid), GID: uint32(gid)}
	ids, _ := u.GroupIds()
	for _, id := range ids {
		g, _ := strconv.ParseUint(id, 10, 32)
		us.Groups = append(us.Groups, uint32(g))
	}
	return us
}

// Command is name with args, to be run as u: its uid, group and
// supplementary groups, nothing else of root's.
func (u *User) Command(name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}}
	c.Dir = "/"
	c.Env = []string{"PATH=/usr/bin:/bin", "HOME=/", "USER=" + u.Name, "LOGNAME=" + u.Name}
	return c
}

// Sh runs a shell command line as u and returns its combined output and
// whether it succeeded.
func (u *User) Sh(script string) (string, bool) {
	out, err := u.Command("sh", "-c", script).CombinedOutput()
	return string(out), err == nil
}

// run runs an account tool, failing t if it fails.
func run(t testing.TB, cmd string, args ...string) {
	t.Helper()
	if out, err := retry(cmd, args...); err != nil {
		t.Fatalf("%s %v: %v\n%s", cmd, args, err, out)
	}
}

// retry runs an account tool, again while another one holds the lock of
// /etc/passwd (tests of several packages create users at the same time).
func retry(cmd string, args ...string) ([]byte, error) {
	for attempt := 1; ; attempt++ {
		out, err := exec.Command(cmd, args...).CombinedOutput()
		if err == nil || attempt == 50 || !strings.Contains(string(out), "lock") {
			return out, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}
