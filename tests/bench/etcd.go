package bench

import (
	"context"
	"math"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend/etcd"
	"github.com/lockrun/lockrun/internal/etcdtest"
)

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
		// Not queued to 1000 (see maxQueue): on two cores, a thousand
		// etcdctl locks lost their 10 s sessions while they queued, and
		// etcdctl lock does not stop a command whose lease is gone.
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
	tg.served = func() int64 { return srv.Received(e.tb) }
	tg.rtt = func() time.Duration {
		return roundTrip(func() error { _, err := c.Get(ctx, "rtt"); return err })
	}
	tg.lockrun, tg.peer = tg.tools(srv.Addr())
	return tg
}
