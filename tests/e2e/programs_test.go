package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// Every server backend's URL scheme reaches the program that has its
// client: lockrun starts it in its place, and that program's own URL
// parser answers (each URL below is one it refuses, exit 64).
func TestEveryServerSchemeReachesItsClient(t *testing.T) {
	e := env(t)
	for _, u := range []string{
		"redis://127.0.0.1/?nosuchparam=1", "rediss://127.0.0.1/?nosuchparam=1",
		"redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/?nosuchparam=1", "redlocks://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/?nosuchparam=1",
		"etcd://127.0.0.1/?nosuchparam=1", "etcds://127.0.0.1/?nosuchparam=1",
		"postgres://127.0.0.1/x?sslmode=bogus", "postgresql://127.0.0.1/x?sslmode=bogus",
		"zk://127.0.0.1/?nosuchparam=1", "zks://127.0.0.1/?nosuchparam=1",
	} {
		r := run(t, e, "status", "-b", u, "k")
		if r.Code != 64 || !strings.Contains(r.Stderr, "invalid backend URL") {
			t.Errorf("status -b %s: exit %d, stderr %q; want its client's refusal of the URL, exit 64", u, r.Code, r.Stderr)
		}
	}
}

// A lockrun installed without the program that has a backend's client
// says which program it needs and where it looked, in one line, exit 78;
// a program misnamed as that one (lockrun itself, say) does not start
// itself over and over.
func TestAMissingClientProgramIsNamed(t *testing.T) {
	e := env(t)
	src, err := os.ReadFile(lockruntest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lone := filepath.Join(dir, "lockrun")
	if err := os.WriteFile(lone, src, 0o755); err != nil {
		t.Fatal(err)
	}
	r := lockruntest.RunBinary(t, lone, e, "run", "-b", "etcd://127.0.0.1:2379", "k", "--", "true")
	if r.Code != 78 || !strings.Contains(r.Stderr, "lockrun-etcd") || !strings.Contains(r.Stderr, dir) || strings.Count(r.Stderr, "\n") != 1 {
		t.Errorf("lockrun without lockrun-etcd: exit %d, stderr %q; want one line naming lockrun-etcd and %s, exit 78", r.Code, r.Stderr, dir)
	}
	if err := os.WriteFile(filepath.Join(dir, "lockrun-etcd"), src, 0o755); err != nil {
		t.Fatal(err)
	}
	r = lockruntest.RunBinary(t, lone, e, "run", "-b", "etcd://127.0.0.1:2379", "k", "--", "true")
	if r.Code != 78 || !strings.Contains(r.Stderr, "misnamed") {
		t.Errorf("lockrun with a misnamed lockrun-etcd: exit %d, stderr %q; want it refused, exit 78", r.Code, r.Stderr)
	}
}

// The command never sees the mark a started program is given.
func TestTheCommandDoesNotSeeTheDelegationMark(t *testing.T) {
	r := run(t, envFor(redistest.Start(t).URL()), "run", "k", "--", "sh", "-c", "env | grep '^LOCKRUN_' | cut -d= -f1")
	if r.Code != 0 || strings.Contains(r.Stdout, "DELEGATED") || !strings.Contains(r.Stdout, "LOCKRUN_FENCING_TOKEN") {
		t.Errorf("the command's LOCKRUN_ variables: exit %d, %q (stderr %q); want the token and no delegation mark", r.Code, r.Stdout, r.Stderr)
	}
}

// lockrun's early guess at --backend can be wrong (here "--" is the
// holder's name, not the end of the flags): the program it starts then
// hands the run to the one whose client the parsed flags name.
func TestAWrongGuessAtTheBackendStillReachesItsClient(t *testing.T) {
	e := append(env(t), "LOCKRUN_BACKEND=etcd://127.0.0.1:1")
	r := run(t, e, "run", "--holder", "--", "-b", "redis://127.0.0.1:1/?nosuchparam=1", "k", "--", "true")
	if r.Code != 64 || !strings.Contains(r.Stderr, "redis://127.0.0.1:1") || !strings.Contains(r.Stderr, "invalid backend URL") {
		t.Errorf("run with -b redis:// after a holder named --: exit %d, stderr %q; want the redis client's refusal of the URL, exit 64", r.Code, r.Stderr)
	}
}

// lockrun starts the program with a server backend's client before its
// own CLI's packages initialise: a run on a server backend initialises
// urfave/cli once, in the program started, not twice.
func TestAServerRunStartsItsProgramBeforeTheCLIInitialises(t *testing.T) {
	e := append(env(t), "GODEBUG=inittrace=1")
	r := run(t, e, "status", "-b", "etcd://127.0.0.1/?nosuchparam=1", "k")
	if n := strings.Count(r.Stderr, "init github.com/urfave/cli/v2 "); r.Code != 64 || n != 1 {
		t.Errorf("status -b etcd://: exit %d, urfave/cli initialised %d times; want 64 (lockrun-etcd's refusal of the URL) and once", r.Code, n)
	}
}

// A program installed in a client's place that starts lockrun again (a
// wrapper script, say) is refused at once, exit 78, where lockrun and it
// used to start each other forever.
func TestAWrapperInAClientsPlaceDoesNotLoop(t *testing.T) {
	e := env(t)
	src, err := os.ReadFile(lockruntest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lone := filepath.Join(dir, "lockrun")
	if err := os.WriteFile(lone, src, 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := "#!/bin/sh\nexec \"$(dirname \"$0\")/lockrun\" \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "lockrun-etcd"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a loop never ends
	defer cancel()
	cmd := exec.CommandContext(ctx, lone, "run", "-b", "etcd://127.0.0.1:2379", "k", "--", "true")
	cmd.Env = e
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 78 || !strings.Contains(stderr.String(), "wrapper") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("lockrun with a wrapper as lockrun-etcd: exit %d (%v), stderr %q; want one line, exit 78, at once", code, err, stderr.String())
	}
}
