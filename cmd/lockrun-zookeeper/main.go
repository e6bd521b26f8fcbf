// See cmd/lockrun: the runtime keeps the GOMAXPROCS of its start.

//go:debug updatemaxprocs=0

// Command lockrun-zookeeper is lockrun with the ZooKeeper backend's
// client: lockrun starts it, in its place, for a zk:// or zks:// backend.
package main

import (
	"context"
	"net/url"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/backend/zookeeper"
	"github.com/lockrun/lockrun/internal/app"
)

func open(ctx context.Context, u *url.URL) (backend.Backend, error) { return zookeeper.OpenURL(ctx, u) }

func main() { app.Exit(app.Clients{"zk": open, "zks": open}) }
