// See cmd/lockrun: the runtime keeps the GOMAXPROCS of its start.

//go:debug updatemaxprocs=0

// Command lockrun-redis is lockrun with the Redis client, for the redis
// and the redlock backends: lockrun starts it, in its place, for a
// redis://, rediss://, redlock:// or redlocks:// backend.
package main

import (
	"context"
	"net/url"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/backend/redis"
	"github.com/lockrun/lockrun/backend/redlock"
	"github.com/lockrun/lockrun/internal/app"
)

func openRedis(ctx context.Context, u *url.URL) (backend.Backend, error) {
	return redis.OpenURL(ctx, u)
}

func openRedlock(ctx context.Context, u *url.URL) (backend.Backend, error) {
	return redlock.OpenURL(ctx, u)
}

func main() {
	redis.DisableClientLogs() // its failures reach us as errors; stderr is the command's too
	app.Exit(app.Clients{"redis": openRedis, "rediss": openRedis, "redlock": openRedlock, "redlocks": openRedlock})
}
