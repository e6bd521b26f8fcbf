package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Config says what to measure.
type Config struct {
	Lockrun  string   // the lockrun binary under test
	Baseline string   // another lockrun binary to compare it with; none when empty
	Stamp    string   // the stamp binary (./stamp)
	Backends []string // the backends to measure; all when empty
	Measures []int    // the measures to run, by number; all when empty
	Short    bool     // a quick look: fewer samples, no 100-waiter queue

	OverheadRuns int // runs of each command in the overhead measure; 0 is its default
}

// env is what the measures share.
type env struct {
	tb       testing.TB
	lockrun  string
	stamp    string
	baseline string // see Config.Baseline
	dir      string // logs and gates
	short    bool
	keys     int
	runs     int // see Config.OverheadRuns
}

// key returns a key no other measure uses.
func (e *env) key(what string) string {
	e.keys++
	return fmt.Sprintf("%s-%d-%d", what, os.Getpid(), e.keys)
}

// stampArgs is the argv of a stamp with flags.
func (e *env) stampArgs(flags ...string) []string { return append([]string{e.stamp}, flags...) }

// samplesOf scales a sample count down for a short run.
func (e *env) samplesOf(n int) int {
	if e.short {
		return max(n/4, 2)
	}
	return n
}

// Report starts the servers, runs every measure on every backend and
// writes one markdown table per measure to w, each as soon as it is done.
func Report(tb testing.TB, cfg Config, w io.Writer) {
	e := &env{tb: tb, lockrun: install(tb, cfg.Lockrun), stamp: cfg.Stamp, dir: tb.TempDir(), short: cfg.Short, runs: cfg.OverheadRuns}
	if cfg.Baseline != "" {
		e.baseline = install(tb, cfg.Baseline)
	}
	var tgs []target
	starts := map[string]func() target{"file": e.fileTarget, "redis": e.redisTarget, "redlock": e.redlockTarget, "etcd": e.etcdTarget, "postgres": e.postgresTarget, "zookeeper": e.zookeeperTarget}
	for _, name := range []string{"file", "redis", "redlock", "etcd", "postgres", "zookeeper"} {
		if len(cfg.Backends) == 0 || slices.Contains(cfg.Backends, name) {
			tgs = append(tgs, starts[name]())
		}
	}
	header(w, cfg, hostSpeed(tb))
	measures := []func([]target) *table{e.beforeAfter, e.overhead, e.handoff, e.throughput, e.lossToKill, e.footprint, e.scaling}
	for i, measure := range measures {
		if i == 0 && cfg.Baseline == "" || len(cfg.Measures) > 0 && !slices.Contains(cfg.Measures, i) {
			continue
		}
		begin := time.Now()
		t := measure(tgs)
		t.write(w)
		fmt.Fprintf(os.Stderr, "bench: %s took %v\n", t.title, time.Since(begin).Round(time.Second))
	}
	fmt.Fprintf(w, "Host speed at the end of the run: %s.\n", hostSpeed(tb))
}

// header says when, where and what was measured.
func header(w io.Writer, cfg Config, speed string) {
	fi, _ := os.Stat(cfg.Lockrun)
	var size int64
	if fi != nil {
		size = fi.Size()
	}
	fmt.Fprintf(w, "Measured %s on %d CPUs, %s, Linux %s, every server on loopback; lockrun binary %.1f MiB; %s. Host speed at the start: %s.\n\n",
		time.Now().Format(time.UnixDate), runtime.NumCPU(), osName(), kernel(), float64(size)/(1<<20), peerVersions(), speed)
}

// hostSpeed times a bare `true`, the cost of starting any program, which
// a shared or throttled host can multiply: the same machine has shown
// 0.5 ms on a quiet phase and over 3 ms on a slow one, and lockrun's two
// Go processes slow down more than a C peer does. Every ratio of the
// report should be read with it.
func hostSpeed(tb testing.TB) string {
	var s samples
	for range 100 {
		d, err := timed([]string{"true"})
		if err != nil {
			tb.Fatal(err)
		}
		s = append(s, d)
	}
	return "bare `true` p50 " + ms(s.p50()) + ", p90 " + ms(s.pct(90)) + " of 100 runs"
}

// kernel is the running kernel's release.
func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

// osName is PRETTY_NAME from /etc/os-release.
func osName() string {
	b, _ := os.ReadFile("/etc/os-release")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return runtime.GOOS
}

// peerVersions names the versions of the servers and peer tools.
func peerVersions() string {
	var out []string
	for _, argv := range [][]string{{"redis-server", "--version"}, {"etcd", "--version"}, {"psql", "--version"}, {"flock", "--version"}, {"dpkg-query", "-W", "-f", "ZooKeeper ${Version}", "zookeeper"}} {
		b, err := exec.Command(argv[0], argv[1:]...).Output()
		if err == nil {
			out = append(out, strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		}
	}
	return strings.Join(out, "; ")
}
