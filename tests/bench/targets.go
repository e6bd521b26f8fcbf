package bench

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/internal/netproxy"
)

// tool is one way to run a command under a lock: lockrun, or the peer a
// user would pick instead on the same backend.
type tool struct {
	name   string // as the tables show it
	binary string // the program, for its size
	// cmd is the argv that runs argv under the lock on key, waiting for
	// it; ttl 0 is the tool's default lease.
	cmd func(key string, ttl time.Duration, argv ...string) []string
	// queued counts the contenders waiting on key (not the holder); nil
	// when the tool keeps no queue (it polls).
	queued func(key string) int
	renews bool   // it keeps its lease alive while the command runs
	url    string // lockrun's --backend; empty for a peer
	// maxQueue is the longest queue the scaling measure gives a peer
	// that waits as lockrun does, without polling, in a process light
	// enough for a thousand of it; 0 is peerQueueMax.
	maxQueue int
}

// target is one backend: its server, lockrun on it, and the peer.
type target struct {
	name string
	// tools returns lockrun and the peer, speaking to the server at addr
	// (its own address, or a proxy's); "" for the file backend.
	tools func(addr string) (lockrun, peer tool)
	addr  string
	// viaProxy returns lockrun and the peer with their link cut by p
	// (which forwards to addr); nil: tools(p.Addr()).
	viaProxy func(p *netproxy.Proxy) (lockrun, peer tool)
	served   func() int64         // requests the server has served; nil: no server
	rtt      func() time.Duration // one request's round trip; nil: no server
	lockrun  tool
	peer     tool
}

// pollPause is how long the peers that cannot wait (the redis-cli
// snippet) sleep between two tries, as a shell loop would.
const pollPause = "0.1"

func (e *env) lockrunTool(url string, queued func(string) int) tool {
	return lockrunWith(e.lockrun, url, queued)
}

// lockrunWith is lockrun as the binary at path, on url.
func lockrunWith(path, url string, queued func(string) int) tool {
	return tool{name: "lockrun", binary: path, queued: queued, renews: true, url: url,
		cmd: func(key string, ttl time.Duration, argv ...string) []string {
			return lockrunArgs(path, url, []string{"--wait"}, key, ttl, argv)
		}}
}

// lockrunArgs is the argv of `lockrun run` with flags.
func lockrunArgs(path, url string, flags []string, key string, ttl time.Duration, argv []string) []string {
	args := append([]string{path, "run", "-b", url}, flags...)
	if ttl > 0 {
		args = append(args, "--ttl", ttl.String())
	}
	return append(append(args, key, "--"), argv...)
}

// once is the argv that runs argv under the lock on key as a crontab
// would: lockrun without --wait. Peers wait, which costs nothing on a free
// lock.
func (t tool) once(key string, argv ...string) []string {
	if t.url == "" {
		return t.cmd(key, 0, argv...)
	}
	return lockrunArgs(t.binary, t.url, nil, key, 0, argv)
}

// fileTarget is the embedded file backend, against flock(1) on the same
// lock files.
func (e *env) fileTarget() target {
	dir := e.tb.TempDir()
	queued := func(key string) int { return blockedFlocks(e.tb, filepath.Join(dir, key+".lock")) }
	tg := target{name: "file", tools: func(string) (tool, tool) {
		peer := tool{name: "flock", binary: lookPath(e.tb, "flock"), queued: queued, maxQueue: 1000,
			cmd: func(key string, _ time.Duration, argv ...string) []string {
				return append([]string{"flock", filepath.Join(dir, key+".lock")}, argv...)
			}}
		return e.lockrunTool("file://"+dir, queued), peer
	}}
	tg.lockrun, tg.peer = tg.tools("")
	return tg
}

// blockedFlocks counts the flock(2) requests blocked on path, from
// /proc/locks, where they read "N: -> FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF".
func blockedFlocks(tb testing.TB, path string) int {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return 0
	}
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 6 && fields[1] == "->" && fields[6] == id {
			n++
		}
	}
	return n
}

// roundTrip is the median time of 50 calls of f.
func roundTrip(f func() error) time.Duration {
	var s samples
	for range 50 {
		begin := time.Now()
		if f() == nil {
			s = append(s, time.Since(begin))
		}
	}
	return s.p50()
}

func lookPath(tb testing.TB, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("%s is needed (run .ci/services.sh): %v", name, err)
	}
	return p
}
