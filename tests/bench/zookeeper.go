package bench

import (
	"bufio"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/backend/zookeeper"
	"github.com/lockrun/lockrun/internal/zktest"
)

// zookeeperTarget is a private standalone ZooKeeper, against a kazoo Lock
// (Python, Debian's python3-kazoo) on the same lock path: Debian ships no
// ZooKeeper command that runs a command under a lock (zkCli.sh has none),
// so the peer is what a Python user would write. Both queue on R/K.
func (e *env) zookeeperTarget() target {
	srv := zktest.Start(e.tb)
	c, _, err := zk.Connect([]string{srv.Addr()}, 10*time.Second, zk.WithLogger(quietZK{}))
	if err != nil {
		e.tb.Fatal(err)
	}
	e.tb.Cleanup(c.Close)
	var own atomic.Int64 // requests of this harness, not of the tools
	queued := func(key string) int {
		own.Add(1)
		kids, _, err := c.Children(zookeeper.DefaultRoot + "/" + key)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			e.tb.Fatal(err)
		}
		return max(len(kids)-1, 0) // the lowest holds
	}
	tg := target{name: "zookeeper", addr: srv.Addr(), tools: func(addr string) (tool, tool) {
		kazoo := zktest.KazooLock(e.tb, addr, "")
		peer := tool{name: "kazoo Lock", binary: kazoo[0], queued: queued, renews: true,
			cmd: func(key string, _ time.Duration, argv ...string) []string {
				args := append(append([]string{}, kazoo[:3]...), zookeeper.DefaultRoot+"/"+key, "--")
				return append(args, argv...)
			}}
		return e.lockrunTool(zktest.URL(addr), queued), peer
	}}
	tg.served = func() int64 { return zkReceived(e.tb, srv.Addr()) - own.Load() }
	tg.rtt = func() time.Duration {
		return roundTrip(func() error { own.Add(1); _, _, err := c.Get("/"); return err })
	}
	tg.lockrun, tg.peer = tg.tools(srv.Addr())
	return tg
}

// zkReceived is the count of packets the server received from clients
// (4lw srvr's "Received"), pings included.
func zkReceived(tb testing.TB, addr string) int64 {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("srvr"))
	for sc := bufio.NewScanner(conn); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "Received: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	tb.Fatal("srvr: no Received line")
	return 0
}

// quietZK keeps go-zookeeper's connection log off the report.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}
