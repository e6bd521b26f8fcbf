package main

import (
	"os/exec"
	"strings"
	"testing"
)

// lockrun has the file backend's client only: every run pays for the
// package init and the memory of what it links, and no server backend's
// client (nor gRPC and protobuf, nor a SQL driver) is among it. Those are
// in the programs lockrun starts in their place.
func TestLinksNoServerClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list named no package, not even this one")
	}
	for _, dep := range deps {
		for _, client := range []string{"google.golang.org/grpc", "google.golang.org/protobuf", "go.etcd.io/", "github.com/jackc/",
			"github.com/redis/", "github.com/go-zookeeper/", "/backend/redis", "/backend/etcd", "/backend/postgres", "/backend/zookeeper", "/backend/redlock"} {
			if strings.Contains(dep, client) {
				t.Errorf("lockrun links %s", dep)
			}
		}
	}
}
