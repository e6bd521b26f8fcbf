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
	// records: the backend keeps holder records and lists locks (the
	// file backend's come with branch filetrust).
	records bool
}

var servers = []server{
	{"redis", func(t *testing.T) string { return redistest.Start(t).URL() }, true},
	{"etcd", func(t *testing.T) string { return etcdtest.Start(t).URL() }, true},
	{"postgres", func(t *testing.T) string { return pgtest.Isolated(t, pgtest.Shared()) }, true},
	{"file", func(t *testing.T) string { return "file://" + t.TempDir() }, false},
}

// envFor is the environment of a lockrun on backend url.
func envFor(url string, extra ...string) []string {
	return append(append(os.Environ(), "LOCKRUN_BACKEND="+url), extra...)
}
