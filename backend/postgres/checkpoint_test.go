package postgres

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/pgtest"
)

func TestCheckpointConformance(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	backendtest.RunCheckpoints(t, backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, raw) },
		TTL:  time.Second,
	})
}

func TestInitCreatesTheCheckpointTable(t *testing.T) {
	raw := pgtest.WithParam(t, pgtest.Isolated(t, pgtest.Shared()), ParamCreateTable, "false")
	b := open(t, raw)
	if err := b.Init(t.Context()); err != nil {
		t.Fatal(err)
	}
	l, err := b.Acquire(t.Context(), "k", opts("a"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(t.Context())
	if err := b.SetCheckpoint(t.Context(), "k", l.Token(), []byte("p")); err != nil {
		t.Fatalf("checkpoint after init, without DDL at run time: %v", err)
	}
}
