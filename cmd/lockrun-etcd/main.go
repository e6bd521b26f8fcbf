// See cmd/lockrun: the runtime keeps the GOMAXPROCS of its start.

//go:debug updatemaxprocs=0

// Command lockrun-etcd is lockrun with the etcd backend's client: lockrun
// starts it, in its place, for an etcd:// or etcds:// backend.
package main

import (
	"context"
	"net/url"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/backend/etcd"
	"github.com/lockrun/lockrun/internal/app"
)

func open(ctx context.Context, u *url.URL) (backend.Backend, error) { return etcd.OpenURL(ctx, u) }

func main() { app.Exit(app.Clients{"etcd": open, "etcds": open}) }
