package bench

import (
	"context"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend/redis"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/redistest"
)

// redlockTarget is three private redis-servers as one Redlock set, against
// the redis-cli SET NX snippet on the first of them: no shell snippet does
// Redlock, so the peer is what a user with one of these servers would
// write. The single-Redis row of the same report is the other comparison.
func (e *env) redlockTarget() target {
	var addrs []string
	var clients []*goredis.Client
	for range 3 {
		srv := redistest.Start(e.tb)
		addrs = append(addrs, srv.Addr())
		clients = append(clients, e.loggedClient(srv.Addr()))
	}
	time.Sleep(2 * time.Second) // past restart_wait=1s below, as INFO counts (whole seconds)
	ctx := context.Background()
	queued := func(key string) int {
		return int(clients[0].ZCard(ctx, redis.DefaultPrefix+"{"+key+"}:queue").Val())
	}
	// hosts builds the tools on the masters at hs, the first being the
	// peer's server. Masters just started grant no lock for a TTL
	// (restart_wait); 1s keeps that check, and its cost, in every grant.
	hosts := func(hs ...string) (tool, tool) {
		return e.lockrunTool("redlock://"+strings.Join(hs, ",")+"/0?restart_wait=1s", queued), e.redisCLIPeer(hs[0])
	}
	tg := target{name: "redlock", addr: addrs[0], tools: func(addr string) (tool, tool) {
		return hosts(addr, addrs[1], addrs[2])
	}}
	// A cut must reach a majority: the proxy forwards to the first two
	// masters (Traffic counts both; their renewals leave together).
	tg.viaProxy = func(p *netproxy.Proxy) (tool, tool) {
		return hosts(p.Addr(), p.Also(e.tb, addrs[1]), addrs[2])
	}
	var served int64
	tg.served = func() int64 {
		for _, c := range clients {
			served += clientRequests(e.tb, c)
		}
		return served
	}
	tg.rtt = func() time.Duration { return roundTrip(func() error { return clients[0].Ping(ctx).Err() }) }
	tg.lockrun, tg.peer = tg.tools(addrs[0])
	return tg
}
