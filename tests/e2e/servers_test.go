package e2e_test

import (
	"os"
	"testing"

	"github.com/lockrun/lockrun/internal/etcdtest"
	"github.com/lockrun/lockrun/internal/pgtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// server is one backend the operator-facing tests run on: a real server
// the test starts (or a fresh schema of the shared PostgreSQL).
type server struct {
	name string
	url  func(t *testing.T) string
}

var servers = []server{
	{"redis", func(t *testing.T) string { return redistest.Start(t).URL() }},
	{"etcd", func(t *testing.T) string { return etcdtest.Start(t).URL() }},
	{"postgres", func(t *testing.T) string { return pgtest.Isolated(t, pgtest.Shared()) }},
	{"file", func(t *testing.T) string { return "file://" + t.TempDir() }},
}

// envFor is the environment of a lockrun on backend url.
func envFor(url string, extra ...string) []string {
	return append(append(os.Environ(), "LOCKRUN_BACKEND="+url), extra...)
}
