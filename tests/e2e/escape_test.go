package e2e_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// An unprivileged user has no cgroup: when lockrun is SIGKILLed, what the
// command setsid'd away is re-parented to init, out of the reach of a walk
// of lockrun's descendants. The watchdog must still kill it, well before
// the 3s lease could expire: one escapee that cleared its environment but
// ran through a heartbeat (the watchdog's view of the tree finds it), one
// that kept it and was started just before the kill (its LOCKRUN_RUN_ID
// finds it). Each has children of its own (its sleeps).
func TestUnprivilegedSIGKILLOfLockrunKillsEscapees(t *testing.T) {
	u := newPerson(t)
	dir := mkdir(t, filepath.Join(publicDir(t), "run"), 0o700, int(u.u.UID), int(u.u.GID))
	loop := func(name string) string {
		return `echo $$ > ` + dir + `/` + name + `; while :; do echo $LOCKRUN_FENCING_TOKEN >> ` + dir + `/` + name + `.log; sleep .1; done`
	}
	// The escapees must not hold lockrun's stderr pipe: the test waits
	// for lockrun, whose Wait would wait for them.
	script := `exec >/dev/null 2>&1; setsid env -i sh -c '` + loop("early") + `' & sleep 2; ` +
		`setsid sh -c '` + loop("late") + `' & ` +
		`while [ ! -s ` + dir + `/late ]; do sleep .01; done; echo > ` + dir + `/ready; wait`
	j := u.start([]string{"LOCKRUN_BACKEND=file://" + dir}, dir+"/ready", "run", "--ttl", "3s", key(t), "--", "sh", "-c", script)
	pids := append(pidsFrom(t, dir+"/early"), pidsFrom(t, dir+"/late")...)
	t.Cleanup(func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	killed := time.Now()
	j.c.Process.Kill()
	select {
	case <-j.done:
	case <-time.After(5 * time.Second):
		t.Fatal("lockrun not reaped 5s after its SIGKILL")
	}
	waitDead(t, pids, time.Second)
	t.Logf("escapees dead %v after lockrun's SIGKILL", time.Since(killed))
	sizes := func() (n [2]int64) {
		for i, name := range []string{"early.log", "late.log"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil {
				n[i] = fi.Size()
			}
		}
		return n
	}
	before := sizes()
	time.Sleep(400 * time.Millisecond)
	if after := sizes(); after != before {
		t.Errorf("something of the command still writes after the escapees died: log sizes %v, then %v", before, after)
	}
}
