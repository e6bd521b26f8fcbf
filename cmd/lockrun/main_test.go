package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The server backends' clients, each by the import paths that are its
// alone, and the program that links it.
var clients = map[string][]string{
	"lockrun-redis":     {"github.com/redis/", "/backend/redis", "/backend/redlock"},
	"lockrun-etcd":      {"google.golang.org/grpc", "google.golang.org/protobuf", "go.etcd.io/", "/backend/etcd"},
	"lockrun-postgres":  {"github.com/jackc/", "/backend/postgres"},
	"lockrun-zookeeper": {"github.com/go-zookeeper/", "/backend/zookeeper"},
}

// Every run pays for the package init and the memory of what its program
// links: lockrun has no server backend's client, and each program beside
// it has its own client only.
func TestEachProgramLinksItsOwnClientOnly(t *testing.T) {
	for _, prog := range []string{"lockrun", "lockrun-redis", "lockrun-etcd", "lockrun-postgres", "lockrun-zookeeper"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "../"+prog).Output()
		if err != nil {
			t.Fatalf("go list ../%s: %v", prog, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) == 0 {
			t.Fatalf("go list named no package for %s, not even its own", prog)
		}
		for owner, paths := range clients {
			if owner == prog {
				continue
			}
			for _, dep := range deps {
				for _, p := range paths {
					if strings.Contains(dep, p) {
						t.Errorf("%s links %s, %s's client", prog, dep, owner)
					}
				}
			}
		}
	}
}
