package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockrun/lockrun/backend/etcd"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/etcdtest"
	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/pgtest"
	"github.com/lockrun/lockrun/internal/redistest"
)

// Hand-offs through the real binary, per backend, for benchstat (make
// microbench); the side-by-side report is BenchmarkReport. They moved here
// from the backends' packages, whose tests no longer build the CLI.

// BenchmarkBinaryHandoffRedis measures, through the real binary, the time from
// the holder's command exiting to the next waiter's command starting, with
// a few lockruns queued in --wait. Both ends are `date` runs, so each
// hand-off also includes about a fork and exec.
func BenchmarkBinaryHandoffRedis(b *testing.B) {
	const queued = 4
	srv := redistest.Start(b)
	bin := lockruntest.Binary(b)
	child := "date +%s%N; sleep 0.05; exec date +%s%N" // hold long enough for the next lockrun to queue
	var runs [][2]int64
	var mu sync.Mutex
	slots := make(chan struct{}, queued)
	var wg sync.WaitGroup
	for range b.N + 1 {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			out, err := exec.Command(bin, "run", "-b", srv.URL(), "--wait", "k", "--", "sh", "-c", child).Output()
			var start, end int64
			if _, serr := fmt.Sscan(string(out), &start, &end); err != nil || serr != nil {
				b.Errorf("lockrun: %v, output %q", err, out)
				return
			}
			mu.Lock()
			runs = append(runs, [2]int64{start, end})
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(runs, func(x, y [2]int64) int { return int(x[0] - y[0]) })
	var took []time.Duration
	for i := 1; i < len(runs); i++ {
		took = append(took, time.Duration(runs[i][0]-runs[i-1][1]))
	}
	backendtest.ReportLatencies(b, took)
}

// BenchmarkBinaryHandoffEtcd measures, through the lockrun binary, the time
// from the holder's command ending to the waiter's command starting, and
// the same for `etcdctl lock` on the same server.
func BenchmarkBinaryHandoffEtcd(b *testing.B) {
	srv := etcdtest.Start(b)
	bin := lockruntest.Binary(b)
	tools := map[string]func(key, script string) *exec.Cmd{
		"lockrun": func(key, script string) *exec.Cmd {
			return exec.Command(bin, "run", "-b", srv.URL(), "--wait", key, "--", "sh", "-c", script)
		},
		"etcdctl": func(key, script string) *exec.Cmd {
			return exec.Command("etcdctl", "--endpoints", srv.Addr(), "lock", etcd.DefaultPrefix+key, "--", "sh", "-c", script)
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
	etcdtest.WaitQueued(b, c, etcd.DefaultPrefix+key+"/", 1)
	if err := waiter.Start(); err != nil {
		b.Fatal(err)
	}
	etcdtest.WaitQueued(b, c, etcd.DefaultPrefix+key+"/", 2)
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

// BenchmarkBinaryHandoffPostgres measures, through the real binary, the time from
// the holder's command ending to the waiting lockrun's command starting.
// Each hand-off takes about 0.3 s of set-up; run it with -benchtime=20x.
func BenchmarkBinaryHandoffPostgres(b *testing.B) {
	e := append(os.Environ(), "LOCKRUN_BACKEND="+pgtest.Isolated(b, pgtest.Shared()))
	dir := b.TempDir()
	ready, end, start := filepath.Join(dir, "ready"), filepath.Join(dir, "end"), filepath.Join(dir, "start")
	var lat []time.Duration
	for b.Loop() {
		for _, f := range []string{ready, end, start} {
			os.Remove(f)
		}
		holder := lockruntest.Start(b, e, "run", "k", "--", "sh", "-c", "echo > "+ready+"; sleep 0.3; date +%s%N > "+end)
		lockruntest.WaitLine(b, ready)
		out, err := os.Create(start)
		if err != nil {
			b.Fatal(err)
		}
		waiter := exec.Command(lockruntest.Binary(b), "run", "--wait", "k", "--", "date", "+%s%N")
		waiter.Env, waiter.Stdout, waiter.Stderr = e, out, os.Stderr
		if err := waiter.Run(); err != nil {
			b.Fatalf("waiter: %v", err)
		}
		out.Close()
		lockruntest.ExitCode(b, holder)
		ended, _ := strconv.ParseInt(lockruntest.WaitLine(b, end), 10, 64)
		started, _ := strconv.ParseInt(lockruntest.WaitLine(b, start), 10, 64)
		lat = append(lat, time.Duration(started-ended))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}
