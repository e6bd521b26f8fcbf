package e2e_test

import (
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/internal/redistest"
)

func TestRedisInitLoadsTheFenceFunctions(t *testing.T) {
	srv := redistest.Start(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { c.Close() })
	if err := c.FCall(t.Context(), "lockrun_fence", []string{"f"}, "1").Err(); err == nil {
		t.Fatal("lockrun_fence exists before init")
	}
	for range 2 {
		if r := run(t, withBackend(srv.URL()), "init"); r.Code != 0 || !strings.Contains(r.Stdout, "ready") {
			t.Fatalf("init: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
		}
	}
	if err := c.FCall(t.Context(), "lockrun_fence", []string{"f"}, "2").Err(); err != nil {
		t.Fatalf("after init: %v", err)
	}
	if err := c.FCall(t.Context(), "lockrun_fence", []string{"f"}, "1").Err(); err == nil || !strings.HasPrefix(err.Error(), "FENCED") {
		t.Fatalf("older token after init: %v, want FENCED", err)
	}
}
