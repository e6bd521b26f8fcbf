package bench

import (
	"bufio"
	"errors"
	"fmt"
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
	queued := func(key string) int {
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
	// The server's count of received packets includes this harness's:
	// its four-letter words (one packet each) and everything its session
	// sent, pings included, which the server counts per connection.
	// The two counts are read between two reads of the harness's, until
	// those agree: a ping of its session between them would count once.
	var words atomic.Int64
	tg.served = func() int64 {
		for {
			own := zkWord(e.tb, srv.Addr(), "cons", sessionReceived(c.SessionID()))
			all := zkWord(e.tb, srv.Addr(), "srvr", receivedLine)
			again := zkWord(e.tb, srv.Addr(), "cons", sessionReceived(c.SessionID()))
			if words.Add(3); own == again {
				return all - own - words.Load()
			}
		}
	}
	tg.rtt = func() time.Duration {
		return roundTrip(func() error { _, _, err := c.Get("/"); return err })
	}
	tg.lockrun, tg.peer = tg.tools(srv.Addr())
	return tg
}

// zkWord sends a four-letter word to the server at addr and returns the
// number that read finds in a line of its answer.
func zkWord(tb testing.TB, addr, word string, read func(line string) (int64, bool)) int64 {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte(word))
	for sc := bufio.NewScanner(conn); sc.Scan(); {
		if n, ok := read(sc.Text()); ok {
			return n
		}
	}
	tb.Fatalf("%s: no line of the answer says what the bench counts", word)
	return 0
}

// receivedLine reads srvr's "Received: N", the packets the server received
// from all clients, pings included.
func receivedLine(line string) (int64, bool) {
	v, ok := strings.CutPrefix(line, "Received: ")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// sessionReceived reads, in cons's list of connections, the packets
// received on session id's: "/IP:PORT[1](queued=0,recved=N,sent=M,sid=0xID,...".
func sessionReceived(id int64) func(string) (int64, bool) {
	sid := fmt.Sprintf(",sid=0x%x,", uint64(id)) // unsigned, as Java's Long.toHexString
	return func(line string) (int64, bool) {
		_, rest, ok := strings.Cut(line, "recved=")
		if !ok || !strings.Contains(line, sid) {
			return 0, false
		}
		v, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
}

// quietZK keeps go-zookeeper's connection log off the report.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}
