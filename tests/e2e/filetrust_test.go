package e2e_test

// The file backend on a shared host: each attack of issue 12, tried for
// real by unprivileged users that the test creates (as root) and removes.
// LOCKRUN_E2E_BINARY runs them against another build (e.g. an old one, to
// see the attacks succeed there).

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/usertest"
)

var (
	sharedBinOnce sync.Once
	sharedBin     string
)

// userBinary is lockrun copied where every user may run it.
func userBinary(t *testing.T) string {
	t.Helper()
	src := os.Getenv("LOCKRUN_E2E_BINARY")
	if src == "" {
		src = lockruntest.Binary(t)
	}
	sharedBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lockrun-users")
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		if err == nil {
			var b []byte
			if b, err = os.ReadFile(src); err == nil {
				sharedBin = filepath.Join(dir, "lockrun")
				err = os.WriteFile(sharedBin, b, 0o755)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	})
	return sharedBin
}

// person is a test user, or root when u is nil.
type person struct {
	t *testing.T
	u *usertest.User
}

func newPerson(t *testing.T, groups ...string) person {
	u := usertest.New(t, groups...)
	t.Cleanup(func() { os.RemoveAll(fmt.Sprintf("/tmp/lockrun-%d", u.UID)) }) // uids are reused
	return person{t, u}
}

func (p person) cmd(env []string, args ...string) *exec.Cmd {
	bin := userBinary(p.t)
	if p.u == nil {
		c := exec.Command(bin, args...)
		c.Env = append(os.Environ(), env...)
		return c
	}
	c := p.u.Command(bin, args...)
	c.Env = append(c.Env, env...)
	return c
}

// run runs lockrun as p to its end.
func (p person) run(env []string, args ...string) lockruntest.Result {
	p.t.Helper()
	c := p.cmd(env, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		p.t.Fatal(err)
	}
	return lockruntest.Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// job is a lockrun run in the background; wait reports how it ended.
type job struct {
	c    *exec.Cmd
	errb *bytes.Buffer
	done chan struct{}
	code int
}

// start runs lockrun as p in the background and waits until its command
// has written ready (a path every user may write to).
func (p person) start(env []string, ready string, args ...string) *job {
	p.t.Helper()
	c := p.cmd(env, args...)
	j := &job{c: c, errb: &bytes.Buffer{}, done: make(chan struct{})}
	c.Stdout, c.Stderr = io.Discard, j.errb
	if err := c.Start(); err != nil {
		p.t.Fatal(err)
	}
	go func() {
		err := c.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			j.code = exit.ExitCode()
		}
		close(j.done)
	}()
	p.t.Cleanup(func() { c.Process.Kill(); <-j.done })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			return j
		}
		select {
		case <-j.done:
			p.t.Fatalf("lockrun %v ended (exit %d) before its command was ready: %s", args, j.code, j.errb)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("lockrun %v: command not ready after 10s", args)
		}
	}
}

// running reports whether the job is still running.
func (j *job) running() bool {
	select {
	case <-j.done:
		return false
	default:
		return true
	}
}

// scratch is a directory every user may write to, for ready files.
func scratch(t *testing.T) string {
	d, err := os.MkdirTemp("", "lockrun-scratch")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o1777)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// publicDir makes a directory reachable by every user (t.TempDir is 0700):
// the place for the lock directories the test shares.
func publicDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "lockrun-public")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func mkdir(t *testing.T, path string, mode os.FileMode, uid, gid int) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// refused checks a one-line refusal with exit 77.
func refused(t *testing.T, what string, r lockruntest.Result, says string) {
	t.Helper()
	if r.Code != 77 || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, says) {
		t.Errorf("%s: exit %d, stderr %q; want 77 and one line saying %q", what, r.Code, r.Stderr, says)
	}
}

func key(t *testing.T) string {
	return fmt.Sprintf("ft-%d-%d", os.Getpid(), time.Now().UnixNano())
}

// Attack 1: B plants KEY.lock in a directory anyone may write to before
// A's first run, to delete it under A's job later. A refuses B's file; in
// A's own default directory B can plant nothing.
func TestFileTrustPlantedLockFileIsRefused(t *testing.T) {
	a, b := newPerson(t), newPerson(t)
	sticky := mkdir(t, filepath.Join(publicDir(t), "locks"), 0o777|os.ModeSticky, 0, 0)
	k := key(t)
	if out, ok := b.u.Sh("umask 0; : > " + sticky + "/" + k + ".lock; chmod 644 " + sticky + "/" + k + ".lock"); !ok {
		t.Fatal(out)
	}
	refused(t, "A's run on B's planted lock file", a.run(nil, "run", "--backend", "file://"+sticky, k, "--", "true"), "permission denied")

	aDir := fmt.Sprintf("/tmp/lockrun-%d", a.u.UID)
	os.RemoveAll(aDir) // left by an earlier user of the same uid
	if out, ok := b.u.Sh("mkdir -m 777 " + aDir); !ok {
		t.Fatal(out)
	}
	refused(t, "A's run in a default directory B made first", a.run(nil, "run", k, "--", "true"), "not safe to use")
	os.RemoveAll(aDir)
	if r := a.run(nil, "run", k, "--", "true"); r.Code != 0 {
		t.Fatalf("A's run in its own default directory: exit %d, %s", r.Code, r.Stderr)
	}
	if out, ok := b.u.Sh(": > " + aDir + "/other.lock; rm -f " + aDir + "/" + k + ".lock"); ok {
		t.Errorf("B wrote into A's default directory: %s", out)
	}
	if fi, err := os.Stat(aDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("A's default directory: %v, %v; want mode 0700", fi, err)
	}
}

// Attack 1, second half: a lock file removed under a running job (here by a
// member of the sharing group, in a directory without the sticky bit) is
// noticed at once, not at the next heartbeat, and the job is stopped as a
// lost lock.
func TestFileTrustRemovedLockFileStopsTheJobAtOnce(t *testing.T) {
	group, gid := usertest.Group(t)
	a, b := newPerson(t, group), newPerson(t, group)
	shared := mkdir(t, filepath.Join(publicDir(t), "team"), 0o770|os.ModeSetgid, 0, int(gid))
	ready, k := filepath.Join(scratch(t), "ready"), key(t)
	env := []string{"LOCKRUN_BACKEND=file://" + shared}
	j := a.start(env, ready, "run", "--ttl", "60s", k, "--", "sh", "-c", ": > "+ready+"; exec sleep 60")
	if out, ok := b.u.Sh("rm " + shared + "/" + k + ".lock"); !ok {
		t.Fatal(out)
	}
	removed := time.Now()
	select {
	case <-j.done:
	case <-time.After(15 * time.Second): // the heartbeat is 20 s
		t.Fatalf("A's job still runs %v after its lock file was removed", time.Since(removed))
	}
	took := time.Since(removed)
	t.Logf("stopped %v after the removal", took.Round(time.Millisecond))
	if j.code != 76 || !strings.Contains(j.errb.String(), "deleted or replaced") {
		t.Errorf("A's lockrun exit %d, stderr %q; want 76 naming the removal", j.code, j.errb)
	}
}

// Attack 2: anyone could release anyone's lock. Now a user who cannot
// write the lock file is told "permission denied" (exit 77), and the
// holder's job runs on.
func TestFileTrustOthersCannotReleaseOrTake(t *testing.T) {
	group, gid := usertest.Group(t)
	a, b := newPerson(t, group), newPerson(t)
	root := person{t: t}
	s, k := scratch(t), key(t)
	shared := mkdir(t, filepath.Join(publicDir(t), "team"), 0o770|os.ModeSetgid|os.ModeSticky, 0, int(gid))
	jobs := map[string]*job{
		"root's default": root.start(nil, s+"/root", "run", k, "--", "sh", "-c", ": > "+s+"/root; exec sleep 60"),
		"A's default":    a.start(nil, s+"/a", "run", k, "--", "sh", "-c", ": > "+s+"/a; exec sleep 60"),
		"A's shared":     a.start([]string{"LOCKRUN_BACKEND=file://" + shared}, s+"/as", "run", k, "--", "sh", "-c", ": > "+s+"/as; exec sleep 60"),
	}
	dirs := map[string]string{"root's default": "/run/lockrun", "A's default": fmt.Sprintf("/tmp/lockrun-%d", a.u.UID), "A's shared": shared}
	for name, dir := range dirs {
		for _, cmd := range [][]string{{"release", k}, {"run", k, "--", "true"}, {"status", k}} {
			r := b.run(nil, append([]string{cmd[0], "--backend", "file://" + dir}, cmd[1:]...)...)
			if cmd[0] == "status" {
				if r.Code == 0 && strings.Contains(r.Stdout, "free") {
					t.Errorf("B's status of %s lock says it is free: %q", name, r.Stdout)
				}
				continue
			}
			refused(t, "B's "+cmd[0]+" of "+name+" lock", r, "")
			if cmd[0] == "release" && !strings.Contains(r.Stderr, "permission denied") {
				t.Errorf("B's release of %s lock: %q, want it to say permission denied", name, r.Stderr)
			}
		}
	}
	time.Sleep(600 * time.Millisecond) // a revoked holder would hear of it within 250 ms, and stop
	for name, j := range jobs {
		if !j.running() {
			t.Errorf("%s job ended (exit %d: %s) after B's attempts", name, j.code, j.errb)
		}
	}
}

// Attack 3: the default directory moved when root ran any lockrun command,
// and a user's next run locked beside its running job. It never moves now.
func TestFileTrustDefaultDirectoryNeverMoves(t *testing.T) {
	a, b := newPerson(t), newPerson(t)
	s, k := scratch(t), key(t)
	j := a.start(nil, s+"/a", "run", k, "--", "sh", "-c", ": > "+s+"/a; exec sleep 60")
	b.u.Sh("mkdir -p /run/lock/lockrun /var/lock/lockrun 2>/dev/null")
	// 1: free, in root's own directory (status answers held/free by its exit status).
	if r := (person{t: t}).run(nil, "status", k); r.Code != 0 && r.Code != 1 {
		t.Fatalf("root's status: exit %d, %s", r.Code, r.Stderr)
	}
	r := a.run(nil, "run", k, "--", "true")
	if r.Code != 75 {
		t.Errorf("A's second run while its first runs, after root's status: exit %d, %q; want 75 (busy)", r.Code, r.Stderr)
	}
	if !j.running() {
		t.Errorf("A's first job ended: %d %s", j.code, j.errb)
	}
}

// Attack 4: an explicit directory had no trust checks.
func TestFileTrustExplicitDirectoryIsVerified(t *testing.T) {
	b := newPerson(t)
	root := person{t: t}
	pub := publicDir(t)
	k := key(t)

	// A symbolic link planted by B towards a directory of root's: root's
	// lockrun must not follow it, nor create anything behind it.
	target := mkdir(t, filepath.Join(pub, "root-only"), 0o700, 0, 0)
	bDir := mkdir(t, filepath.Join(pub, "b"), 0o755, int(b.u.UID), int(b.u.GID))
	if out, ok := b.u.Sh("ln -s " + target + " " + bDir + "/link"); !ok {
		t.Fatal(out)
	}
	refused(t, "root through B's link", root.run(nil, "run", "--backend", "file://"+bDir+"/link/sub", k, "--", "true"), "not safe to use")
	if _, err := os.Stat(filepath.Join(target, "sub")); err == nil {
		t.Error("root's lockrun created a directory behind B's link")
	}

	// A file in root's own directory that is not a lock file is left alone.
	precious := filepath.Join(target, k+".lock")
	os.WriteFile(precious, []byte("precious data\n"), 0o600)
	refused(t, "root on a file that is not a lock file", root.run(nil, "run", "--backend", "file://"+target, k, "--", "true"), "not a lockrun lock file")
	if got, _ := os.ReadFile(precious); string(got) != "precious data\n" {
		t.Errorf("the file now holds %q", got)
	}
	if fi, _ := os.Stat(precious); fi.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode is now %v", fi.Mode())
	}

	// Directories that others may change under a running job.
	for name, mode := range map[string]os.FileMode{"world-writable": 0o777, "group-writable": 0o770} {
		d := mkdir(t, filepath.Join(pub, name), mode, 0, 0)
		refused(t, "a "+name+" directory", root.run(nil, "run", "--backend", "file://"+d, k, "--", "true"), "not safe to use")
	}
	refused(t, "root in B's directory", root.run(nil, "run", "--backend", "file://"+bDir, k, "--", "true"), "not safe to use")
}

// Attack 5: another user forged a record and truncated the file, and the
// next token was lower. Now only those who may write the lock may touch it.
func TestFileTrustTokensCannotBeLowered(t *testing.T) {
	group, gid := usertest.Group(t)
	a, b := newPerson(t, group), newPerson(t)
	shared := mkdir(t, filepath.Join(publicDir(t), "team"), 0o770|os.ModeSetgid|os.ModeSticky, 0, int(gid))
	env, k := []string{"LOCKRUN_BACKEND=file://" + shared}, key(t)
	token := func() uint64 {
		r := a.run(env, "run", k, "--", "sh", "-c", "echo $LOCKRUN_FENCING_TOKEN")
		n, err := strconv.ParseUint(strings.TrimSpace(r.Stdout), 10, 64)
		if r.Code != 0 || err != nil {
			t.Fatalf("A's run: exit %d, %q, %s", r.Code, r.Stdout, r.Stderr)
		}
		return n
	}
	first := token()
	lock := shared + "/" + k + ".lock"
	forged := `{"token":18446744073709551000,"run_id":"x"}`
	for _, attack := range []string{"printf '%s' '" + forged + "' > " + lock, ": > " + lock, "rm -f " + lock, "truncate -s 0 " + lock} {
		if out, ok := b.u.Sh(attack); ok {
			t.Errorf("B's %q succeeded: %s", attack, out)
		}
	}
	if fi, err := os.Stat(lock); err != nil || fi.Mode().Perm()&0o002 != 0 {
		t.Errorf("lock file %v, %v; want it never world-writable", fi, err)
	}
	if next := token(); next <= first {
		t.Errorf("token %d after %d", next, first)
	}
}

// Attack 6: control characters in a record reached root's terminal. The
// CLI refuses such a --holder; a user who may write the lock file can
// still write any record, here one whose min-hold keeps the key taken.
func TestFileTrustStoredTextIsEscaped(t *testing.T) {
	group, gid := usertest.Group(t)
	a := newPerson(t, group)
	root := person{t: t}
	shared := mkdir(t, filepath.Join(publicDir(t), "team"), 0o770|os.ModeSetgid|os.ModeSticky, 0, int(gid))
	env, k := []string{"LOCKRUN_BACKEND=file://" + shared}, key(t)
	if r := a.run(env, "run", k, "--", "true"); r.Code != 0 {
		t.Fatal(r.Stderr)
	}
	now := time.Now().UnixMilli()
	rec := fmt.Sprintf(`{"token":%d,"holder":"evil\u001b]0;owned\u0007\u001b[2J\nlockrun: all good","run_id":"x","since_unix_ms":%d,"hold_until_unix_ms":%d,"min_hold_ms":60000}`,
		now*1000+1, now, now+60000)
	slot := fmt.Sprintf("%s %08x\n", rec, crc32.ChecksumIEEE([]byte(rec)))
	c := a.u.Command("dd", "of="+shared+"/"+k+".lock", "conv=notrunc", "status=none")
	c.Stdin = strings.NewReader(slot + strings.Repeat("\x00", 512-len(slot)) + slot + strings.Repeat("\x00", 512-len(slot)))
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("A writes a record: %v %s", err, out)
	}
	for _, args := range [][]string{{"status", k}, {"run", k, "--", "true"}} {
		r := root.run(env, args...)
		out := r.Stdout + r.Stderr
		// status adds lines of its own (since, renewed); none may be the
		// forged one.
		if strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, "\nlockrun: all good") || strings.HasPrefix(out, "lockrun: all good") ||
			!strings.Contains(out, `evil\x1b]0;owned\x07\x1b[2J\nlockrun: all good`) {
			t.Errorf("root's %s: %q; want the holder escaped on its line, no forged line", args[0], out)
		}
	}
}

// Attack 7: a non-lockrun process (flock -n) holding the file: status and
// the busy message must say so, and release must not pretend to break it.
func TestFileTrustForeignFlockHolderIsNamed(t *testing.T) {
	root := person{t: t}
	dir := mkdir(t, filepath.Join(publicDir(t), "locks"), 0o700, 0, 0)
	env, k := []string{"LOCKRUN_BACKEND=file://" + dir}, key(t)
	if r := root.run(env, "run", k, "--", "true"); r.Code != 0 {
		t.Fatal(r.Stderr)
	}
	ready := filepath.Join(t.TempDir(), "ready")
	fl := exec.Command("flock", "-n", filepath.Join(dir, k+".lock"), "sh", "-c", "echo > "+ready+"; exec sleep 60")
	if err := fl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fl.Process.Kill(); fl.Wait() })
	lockruntest.WaitLine(t, ready)
	want := regexp.MustCompile(`held by a process that is not lockrun: pid ` + strconv.Itoa(fl.Process.Pid) + `\b`)
	for _, c := range []struct {
		args []string
		code int
	}{{[]string{"run", k, "--", "true"}, 75}, {[]string{"status", k}, 0}, {[]string{"release", k}, 75}} {
		r := root.run(env, c.args...)
		if r.Code != c.code || !want.MatchString(r.Stdout+r.Stderr) {
			t.Errorf("%s: exit %d, %q; want %d naming pid %d as not lockrun", c.args[0], r.Code, r.Stdout+r.Stderr, c.code, fl.Process.Pid)
		}
	}
}

// Redis's password may come from $REDISCLI_AUTH; no command sees it.
func TestSecretEnvironmentIsNotPassedOn(t *testing.T) {
	r := (person{t: t}).run(append(env(t), "REDISCLI_AUTH=s3cret"), "run", key(t), "--", "sh", "-c", "echo ${REDISCLI_AUTH-unset}")
	if r.Code != 0 || strings.TrimSpace(r.Stdout) != "unset" {
		t.Errorf("the command saw REDISCLI_AUTH: %q (exit %d, %s)", r.Stdout, r.Code, r.Stderr)
	}
}

// The packages' tmpfiles.d entry makes root's default directory as
// lockrun's own checks want it.
func TestTmpfilesEntryMakesATrustedDirectory(t *testing.T) {
	if _, err := exec.LookPath("systemd-tmpfiles"); err != nil {
		t.Skip("no systemd-tmpfiles on this machine")
	}
	usertest.Require(t) // tmpfiles --create chowns to root
	root := t.TempDir()
	conf, err := os.ReadFile("../../packaging/tmpfiles.d/lockrun.conf")
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(root+"/etc/tmpfiles.d", 0o755)
	os.MkdirAll(root+"/run", 0o755)
	os.WriteFile(root+"/etc/tmpfiles.d/lockrun.conf", conf, 0o644)
	if out, err := exec.Command("systemd-tmpfiles", "--create", "--root="+root).CombinedOutput(); err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, out)
	}
	os.Chmod(root, 0o755)
	r := (person{t: t}).run(nil, "run", "--backend", "file://"+root+"/run/lockrun", "k", "--", "true")
	if r.Code != 0 {
		t.Errorf("lockrun in the directory tmpfiles made: exit %d, %s", r.Code, r.Stderr)
	}
}

// The opt-in: in a directory an admin shares with a group (3770, as the
// docs say), members exclude each other and may release each other's
// locks, whoever took the lock first.
func TestFileTrustGroupDirectorySharesLocks(t *testing.T) {
	group, gid := usertest.Group(t)
	a, c := newPerson(t, group), newPerson(t, group)
	shared := mkdir(t, filepath.Join(publicDir(t), "team"), 0o770|os.ModeSetgid|os.ModeSticky, 0, int(gid))
	env, s, k := []string{"LOCKRUN_BACKEND=file://" + shared}, scratch(t), key(t)
	j := a.start(env, s+"/a", "run", "--holder", "alice-job", k, "--", "sh", "-c", ": > "+s+"/a; exec sleep 60")
	if r := c.run(env, "run", k, "--", "true"); r.Code != 75 || !strings.Contains(r.Stderr, "alice-job") {
		t.Errorf("C's run while A holds the lock: exit %d, %q; want 75 naming A's job", r.Code, r.Stderr)
	}
	if r := c.run(env, "release", k); r.Code != 0 {
		t.Fatalf("C's release of A's lock in the group's directory: exit %d, %s", r.Code, r.Stderr)
	}
	select {
	case <-j.done:
		if j.code != 76 {
			t.Errorf("A's lockrun after C's release: exit %d, %s; want 76", j.code, j.errb)
		}
	case <-time.After(15 * time.Second):
		t.Error("A's job still runs 15 s after C released its lock")
	}
	if r := c.run(env, "run", k, "--", "true"); r.Code != 0 {
		t.Errorf("C's run after A's job stopped: exit %d, %s", r.Code, r.Stderr)
	}
}

// The command's control socket is abstract, so it has no file mode: a
// lockrun answers only its own user (and root), by the peer's
// credentials. B, who knows A's socket's name, gets no answer; A's
// command does.
func TestFileTrustControlSocketAnswersItsUserOnly(t *testing.T) {
	a, b := newPerson(t), newPerson(t)
	dir := scratch(t)
	sock, ready := filepath.Join(dir, "sock"), filepath.Join(dir, "ready")
	a.start(nil, ready, "run", key(t), "--", "sh", "-c",
		"umask 022; echo $LOCKRUN_CONTROL > "+sock+"; lockrun_out=$("+userBinary(t)+" fence check 2>&1); "+
			"echo \"$?\" > "+ready+".tmp; mv "+ready+".tmp "+ready+"; sleep 30") // whole once it exists: the test reads it at once
	name, err := os.ReadFile(sock)
	if err != nil {
		t.Fatal(err)
	}
	if own, _ := os.ReadFile(ready); strings.TrimSpace(string(own)) != "0" {
		t.Fatalf("A's own fence check exited %q, want 0", own)
	}
	r := b.run([]string{"LOCKRUN_CONTROL=" + strings.TrimSpace(string(name))}, "fence", "check")
	if r.Code == 0 || r.Code == 76 {
		t.Errorf("B's fence check on A's control socket: exit %d (%s); want it unanswered", r.Code, r.Stderr)
	}
}
