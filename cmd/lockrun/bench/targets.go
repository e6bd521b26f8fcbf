package bench

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/backend/etcd"
	"github.com/lockrun/lockrun/backend/etcd/etcdtest"
	"github.com/lockrun/lockrun/backend/redis"
	"github.com/lockrun/lockrun/backend/redis/redistest"
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
	renews bool // it keeps its lease alive while the command runs
}

// target is one backend: its server, lockrun on it, and the peer.
type target struct {
	name string
	// tools returns lockrun and the peer, speaking to the server at addr
	// (its own address, or a proxy's); "" for the file backend.
	tools   func(addr string) (lockrun, peer tool)
	addr    string
	served  func() int64         // requests the server has served; nil: no server
	rtt     func() time.Duration // one request's round trip; nil: no server
	lockrun tool
	peer    tool
}

// pollPause is how long the peers that cannot wait (the redis-cli
// snippet) sleep between two tries, as a shell loop would.
const pollPause = "0.1"

func (e *env) lockrunTool(url string, queued func(string) int) tool {
	return tool{name: "lockrun", binary: e.lockrun, queued: queued, renews: true,
		cmd: func(key string, ttl time.Duration, argv ...string) []string {
			args := []string{e.lockrun, "run", "-b", url, "--wait"}
			if ttl > 0 {
				args = append(args, "--ttl", ttl.String())
			}
			return append(append(args, key, "--"), argv...)
		}}
}

// fileTarget is the embedded file backend, against flock(1) on the same
// lock files.
func (e *env) fileTarget() target {
	dir := e.tb.TempDir()
	queued := func(key string) int { return blockedFlocks(e.tb, filepath.Join(dir, key+".lock")) }
	tg := target{name: "file", tools: func(string) (tool, tool) {
		peer := tool{name: "flock", binary: lookPath(e.tb, "flock"), queued: queued,
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

// redisTarget is a private redis-server, against the SET NX + DEL shell
// snippet, which cannot wait: it tries again every pollPause.
func (e *env) redisTarget() target {
	srv := redistest.Start(e.tb)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ClientName: "bench"})
	e.tb.Cleanup(func() { c.Close() })
	ctx := context.Background()
	// Every command is logged, with the client that sent it: commands run
	// by scripts are logged too, under the client "?:0", and are not
	// requests.
	for k, v := range map[string]string{"slowlog-log-slower-than": "0", "slowlog-max-len": "1000000"} {
		if err := c.ConfigSet(ctx, k, v).Err(); err != nil {
			e.tb.Fatal(err)
		}
	}
	queued := func(key string) int {
		return int(c.ZCard(ctx, redis.DefaultPrefix+"{"+key+"}:queue").Val())
	}
	tg := target{name: "redis", addr: srv.Addr(), tools: func(addr string) (tool, tool) {
		host, port, _ := strings.Cut(addr, ":")
		snippet := `k=$1 px=$2; shift 2
until [ "$(redis-cli -h ` + host + ` -p ` + port + ` SET "$k" 1 NX PX "$px")" = OK ]; do sleep ` + pollPause + `; done
"$@"; s=$?; redis-cli -h ` + host + ` -p ` + port + ` DEL "$k" >/dev/null; exit $s`
		peer := tool{name: "redis-cli SET NX", binary: lookPath(e.tb, "redis-cli"),
			cmd: func(key string, ttl time.Duration, argv ...string) []string {
				if ttl == 0 {
					ttl = 30 * time.Second
				}
				return append([]string{"sh", "-c", snippet, "sh", "peer:" + key, strconv.FormatInt(ttl.Milliseconds(), 10)}, argv...)
			}}
		return e.lockrunTool("redis://"+addr+"/0", queued), peer
	}}
	var served int64
	tg.served = func() int64 {
		served += clientRequests(e.tb, c)
		return served
	}
	tg.rtt = func() time.Duration { return roundTrip(func() error { return c.Ping(ctx).Err() }) }
	tg.lockrun, tg.peer = tg.tools(srv.Addr())
	return tg
}

// clientRequests counts and clears the slow log: the commands that clients
// other than the benchmark's own sent since the last call.
func clientRequests(tb testing.TB, c *goredis.Client) int64 {
	var logged *goredis.SlowLogCmd
	_, err := c.TxPipelined(context.Background(), func(p goredis.Pipeliner) error {
		logged = p.SlowLogGet(context.Background(), -1)
		p.SlowLogReset(context.Background())
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	var n int64
	for _, l := range logged.Val() {
		if l.ClientAddr != "?:0" && l.ClientName != "bench" {
			n++
		}
	}
	return n
}

// etcdTarget is a private etcd, against `etcdctl lock` on the same keys:
// etcdctl lock /lockrun/K and lockrun run K take the same lock.
func (e *env) etcdTarget() target {
	srv := etcdtest.Start(e.tb)
	c := srv.Client(e.tb)
	ctx := context.Background()
	queued := func(key string) int {
		resp, err := c.Get(ctx, etcd.DefaultPrefix+key+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			e.tb.Fatal(err)
		}
		return max(int(resp.Count)-1, 0) // the oldest entry holds
	}
	tg := target{name: "etcd", addr: srv.Addr(), tools: func(addr string) (tool, tool) {
		peer := tool{name: "etcdctl lock", binary: lookPath(e.tb, "etcdctl"), queued: queued, renews: true,
			cmd: func(key string, ttl time.Duration, argv ...string) []string {
				args := []string{"etcdctl", "--endpoints", addr, "lock"}
				if ttl > 0 {
					args = append(args, "--ttl", strconv.Itoa(int(math.Ceil(ttl.Seconds()))))
				}
				return append(append(args, etcd.DefaultPrefix+key, "--"), argv...)
			}}
		return e.lockrunTool("etcd://"+addr, queued), peer
	}}
	tg.served = func() int64 { return grpcRequests(e.tb, srv.Addr()) }
	tg.rtt = func() time.Duration {
		return roundTrip(func() error { _, err := c.Get(ctx, "rtt"); return err })
	}
	tg.lockrun, tg.peer = tg.tools(srv.Addr())
	return tg
}

// grpcRequests sums the messages etcd received from clients, unary calls
// and stream messages (keep-alives, watch requests) alike, from its
// metrics.
func grpcRequests(tb testing.TB, addr string) int64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		tb.Fatalf("reading etcd metrics: %v", err)
	}
	defer resp.Body.Close()
	var n float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "grpc_server_msg_received_total{") {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			n += v
		}
	}
	return int64(n)
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
