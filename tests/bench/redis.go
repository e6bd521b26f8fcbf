package bench

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend/redis"
	"github.com/lockrun/lockrun/internal/redistest"
)

// redisTarget is a private redis-server, against the SET NX + DEL shell
// snippet, which cannot wait: it tries again every pollPause.
func (e *env) redisTarget() target {
	srv := redistest.Start(e.tb)
	time.Sleep(2 * time.Second) // past restart_wait=1s below, as INFO counts (whole seconds)
	c := e.loggedClient(srv.Addr())
	ctx := context.Background()
	queued := func(key string) int {
		return int(c.ZCard(ctx, redis.DefaultPrefix+"{"+key+"}:queue").Val())
	}
	tg := target{name: "redis", addr: srv.Addr(), tools: func(addr string) (tool, tool) {
		// A server just started grants no lock for a TTL (restart_wait);
		// 1s keeps that check, and its cost, in every grant measured.
		return e.lockrunTool("redis://"+addr+"/0?restart_wait=1s", queued), e.redisCLIPeer(addr)
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

// loggedClient is the benchmark's own client of the server at addr, which
// it sets to log every command, with the client that sent it: commands
// run by scripts are logged too, under the client "?:0", and are not
// requests.
func (e *env) loggedClient(addr string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: addr, ClientName: "bench"})
	e.tb.Cleanup(func() { c.Close() })
	for k, v := range map[string]string{"slowlog-log-slower-than": "0", "slowlog-max-len": "1000000"} {
		if err := c.ConfigSet(context.Background(), k, v).Err(); err != nil {
			e.tb.Fatal(err)
		}
	}
	return c
}

// redisCLIPeer is the SET NX + DEL shell snippet on the server at addr,
// which cannot wait: it tries again every pollPause.
func (e *env) redisCLIPeer(addr string) tool {
	host, port, _ := strings.Cut(addr, ":")
	snippet := `k=$1 px=$2; shift 2
until [ "$(redis-cli -h ` + host + ` -p ` + port + ` SET "$k" 1 NX PX "$px")" = OK ]; do sleep ` + pollPause + `; done
"$@"; s=$?; redis-cli -h ` + host + ` -p ` + port + ` DEL "$k" >/dev/null; exit $s`
	return tool{name: "redis-cli SET NX", binary: lookPath(e.tb, "redis-cli"),
		cmd: func(key string, ttl time.Duration, argv ...string) []string {
			if ttl == 0 {
				ttl = 30 * time.Second
			}
			return append([]string{"sh", "-c", snippet, "sh", "peer:" + key, strconv.FormatInt(ttl.Milliseconds(), 10)}, argv...)
		}}
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
