package e2e_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/lockrun/lockrun/internal/etcdtest"
	"github.com/lockrun/lockrun/internal/pgtest"
	"github.com/lockrun/lockrun/internal/redistest"
	"github.com/lockrun/lockrun/internal/zktest"
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

// everyBackend is servers with ZooKeeper and a Redlock set of three
// masters: every backend lockrun has, each on servers of its own.
func everyBackend() []server {
	return append(slices.Clone(servers),
		server{"zookeeper", func(t *testing.T) string { return zktest.Start(t).URL() }},
		server{"redlock", func(t *testing.T) string {
			_, e := redlockSet(t)
			return strings.TrimPrefix(e[len(e)-1], "LOCKRUN_BACKEND=")
		}})
}
