package etcd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
	"github.com/lockrun/lockrun/internal/lockruntest"
)

// Benchmarks against a private etcd on loopback (fsync on, as in
// production): go test -run '^$' -bench . ./backend/etcd

func BenchmarkAcquireRelease(b *testing.B) {
	srv := etcdtest.Start(b)
	backendtest.BenchAcquireRelease(b, openTest(b, srv.URL()), backendtest.Key(nil), opts("a", false))
}

func BenchmarkRenew(b *testing.B) {
	srv := etcdtest.Start(b)
	backendtest.BenchRenew(b, openTest(b, srv.URL()), backendtest.Key(nil), opts("a", false))
}

// BenchmarkHandoff measures release → the next waiter's Acquire returns,
// with 1 waiter and with 100 queued: each release wakes only the next in
// line, so the cost should not grow with the queue.
func BenchmarkHandoff(b *testing.B) {
	for _, waiters := range []int{1, 100} {
		b.Run(fmt.Sprint("waiters=", waiters), func(b *testing.B) {
			srv := etcdtest.Start(b)
			clients := make([]*Backend, waiters+1)
			for i := range clients {
				clients[i] = openTest(b, srv.URL())
			}
			c := srv.Client(b)
			var lat []time.Duration
			for b.Loop() {
				lat = append(lat, handoffs(b, c, clients)...)
			}
			backendtest.ReportLatencies(b, lat)
		})
	}
}

// handoffs lets clients[0] take a key, queues the others in order, then
// has each holder release at once; it returns each release-to-grant time.
func handoffs(b *testing.B, c *clientv3.Client, clients []*Backend) []time.Duration {
	key := backendtest.Key(nil)
	first, err := clients[0].Acquire(b.Context(), key, opts("h", false))
	if err != nil {
		b.Fatal(err)
	}
	n := len(clients) - 1
	var mu sync.Mutex
	acquired, released := make([]time.Time, n+1), make([]time.Time, n+1)
	var wg sync.WaitGroup
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			l, err := clients[i].Acquire(b.Context(), key, opts(fmt.Sprint("w", i), true))
			if err != nil {
				b.Error(err)
				return
			}
			mu.Lock()
			acquired[i], released[i] = time.Now(), time.Now()
			mu.Unlock()
			l.Release(context.Background())
		})
		waitQueued(b, c, key, i+1)
	}
	released[0] = time.Now()
	first.Release(b.Context())
	wg.Wait()
	lat := make([]time.Duration, n)
	for i := range lat {
		lat[i] = acquired[i+1].Sub(released[i])
	}
	return lat
}

// BenchmarkHandoffBinary measures, through the lockrun binary, the time
// from the holder's command ending to the waiter's command starting, and
// the same for `etcdctl lock` on the same server.
func BenchmarkHandoffBinary(b *testing.B) {
	srv := etcdtest.Start(b)
	bin := lockruntest.Binary(b)
	tools := map[string]func(key, script string) *exec.Cmd{
		"lockrun": func(key, script string) *exec.Cmd {
			return exec.Command(bin, "run", "-b", srv.URL(), "--wait", key, "--", "sh", "-c", script)
		},
		"etcdctl": func(key, script string) *exec.Cmd {
			return exec.Command("etcdctl", "--endpoints", srv.Addr(), "lock", DefaultPrefix+key, "--", "sh", "-c", script)
		},
	}
	for _, name := range []string{"lockrun", "etcdctl"} {
		b.Run(name, func(b *testing.B) {
			c := srv.Client(b)
			var lat []time.Duration
			for b.Loop() {
				lat = append(lat, binaryHandoff(b, c, tools[name]))
			}
			backendtest.ReportLatencies(b, lat)
		})
	}
}

// binaryHandoff runs a holder whose command ends 300ms in and a waiter
// queued behind it; it returns holder's end → waiter's start.
func binaryHandoff(b *testing.B, c *clientv3.Client, tool func(key, script string) *exec.Cmd) time.Duration {
	dir, key := b.TempDir(), backendtest.Key(nil)
	end, start := filepath.Join(dir, "end"), filepath.Join(dir, "start")
	holder := tool(key, "sleep 0.3; date +%s%N > "+end)
	waiter := tool(key, "date +%s%N > "+start)
	if err := holder.Start(); err != nil {
		b.Fatal(err)
	}
	waitQueued(b, c, key, 1)
	if err := waiter.Start(); err != nil {
		b.Fatal(err)
	}
	waitQueued(b, c, key, 2)
	if err := holder.Wait(); err != nil {
		b.Fatal(err)
	}
	if err := waiter.Wait(); err != nil {
		b.Fatal(err)
	}
	return nanos(b, start).Sub(nanos(b, end))
}

// nanos reads a time written by date +%s%N.
func nanos(b *testing.B, path string) time.Time {
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Unix(0, n)
}
