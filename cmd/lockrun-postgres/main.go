// See cmd/lockrun: the runtime keeps the GOMAXPROCS of its start.

//go:debug updatemaxprocs=0

// Command lockrun-postgres is lockrun with the PostgreSQL backend's
// client: lockrun starts it, in its place, for a postgres:// or
// postgresql:// backend.
package main

import (
	"context"
	"net/url"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/backend/postgres"
	"github.com/lockrun/lockrun/internal/app"
)

func open(_ context.Context, u *url.URL) (backend.Backend, error) { return postgres.OpenURL(u) }

func main() { app.Exit(app.Clients{"postgres": open, "postgresql": open}) }
