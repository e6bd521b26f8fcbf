package faults

import (
	"flag"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/etcdtest"
	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/pgtest"
	"github.com/lockrun/lockrun/internal/redistest"
	"github.com/lockrun/lockrun/internal/zktest"
)

var (
	duration = flag.Duration("faults.duration", 2*time.Second, "how long each case runs on each backend")
	only     = flag.String("faults.backends", "", "comma-separated backends to attack (default: all)")
	cases    = flag.String("faults.cases", "", "comma-separated case numbers to run (default: all)")
	hog      = flag.Bool("faults.hog", false, "run every case beside a busy loop on every core")
	sems     = flag.String("faults.semaphores", "file", "comma-separated backends the semaphore cases (--limit) run on, or all")
)

// TestFaults runs every case on every backend and fails on any overlap
// where lockrun's timers ran, any stale write accepted, any late kill, any
// orphan, and any fault that did not bite.
func TestFaults(t *testing.T) {
	hooked := anyCase(func(c Case) bool { return c.Hooked })
	lockruntest.Prebuild("cmd/lockrun") // the builds run beside each other and the servers' start
	lockruntest.Prebuild("tests/faults/faultchild")
	if hooked {
		lockruntest.Prebuild("cmd/lockrun", "testhooks")
	}
	var tgs []Target
	for _, tg := range targets(t) {
		if selected(*only, tg.Name) {
			tgs = append(tgs, tg)
		}
	}
	fr := &faultRun{results: map[string][]Result{}}
	fr.bins = Binaries{Lockrun: lockruntest.Binary(t), Child: lockruntest.Build(t, "tests/faults/faultchild")}
	if hooked {
		fr.bins.Hooked = lockruntest.BuildTags(t, "cmd/lockrun", "testhooks")
	}
	started := time.Now()
	fr.all(t, tgs)
	report(t, tgs, fr.results, started)
}

// faultRun runs the cases and collects their results.
type faultRun struct {
	bins    Binaries
	mu      sync.Mutex
	results map[string][]Result // by backend, in the order run
}

// all attacks every target at the same time, one goroutine each (not
// t.Parallel, which would run GOMAXPROCS of them at a time), each its
// cases in order. The cases meant to run beside the busy loops come last:
// every target waits until all have run their other cases, then the loops
// start, so that they load no case but those meant to be loaded.
func (fr *faultRun) all(t *testing.T, tgs []Target) {
	var others, loaded, wg sync.WaitGroup
	others.Add(len(tgs))
	loaded.Add(len(tgs))
	hogDone := make(chan struct{})
	go func() {
		defer close(hogDone)
		others.Wait()
		if anyCase(hogged) {
			defer startHog(fr.bins.Child, hogBound())()
		}
		loaded.Wait()
	}()
	for i, tg := range tgs {
		wg.Go(func() {
			// Done here, not only in the subtest: one that -run leaves
			// out never runs, and must not keep the others waiting.
			arrived := sync.OnceFunc(others.Done)
			defer loaded.Done()
			defer arrived()
			t.Run(tg.Name, func(t *testing.T) {
				defer arrived()
				fr.cases(t, tg, false, 2*i)
				arrived()
				others.Wait()
				fr.cases(t, tg, true, 0)
			})
		})
	}
	wg.Wait()
	<-hogDone
}

// cases runs on tg the cases that apply to it and are, or are not,
// meant to run beside the busy loops, from the one at index from on and
// round: the targets start at different cases, so that the busy ones (1,
// with five competitors) do not all run at once.
func (fr *faultRun) cases(t *testing.T, tg Target, loaded bool, from int) {
	for k := range Cases {
		c := Cases[(from+k)%len(Cases)]
		if !applies(c, tg) || hogged(c) != loaded {
			continue
		}
		c.Hog = loaded // -faults.hog too: judge reads it
		t.Run(c.Name, func(t *testing.T) {
			r := Run(tg, c, fr.bins, *duration)
			fr.mu.Lock()
			fr.results[tg.Name] = append(fr.results[tg.Name], r)
			fr.mu.Unlock()
			for _, f := range r.Failures {
				t.Error(f)
			}
		})
	}
}

// hogged tells whether c runs beside a busy loop on every core.
func hogged(c Case) bool { return c.Hog || *hog }

// hogBound is longer than the cases beside the busy loops can take: the
// loops end by themselves then, should the test die without stopping them.
func hogBound() time.Duration {
	var d time.Duration
	for _, c := range Cases {
		if hogged(c) {
			d += max(*duration, c.MinDuration) + 30*time.Second
		}
	}
	return d
}

// caseIndex is the place of the case named name in Cases.
func caseIndex(name string) int {
	return slices.IndexFunc(Cases, func(c Case) bool { return c.Name == name })
}

// wanted tells whether c is selected by the flags.
func wanted(c Case) bool {
	return selected(*cases, c.Name[:strings.IndexByte(c.Name, '-')])
}

// applies tells whether c is wanted and can run against tg.
func applies(c Case, tg Target) bool {
	switch {
	case !wanted(c), c.Net && tg.Proxy == nil, c.Fault == nil && !c.Quiet:
		return false
	case c.Name == "4-server-freeze-restart" && tg.Server == nil:
		return false
	case c.Limit > 1 && *sems != "all" && !selected(*sems, tg.Name):
		return false
	case tg.Cases != nil && !slices.Contains(tg.Cases, c.Name):
		return false
	}
	return true
}

// anyCase tells whether a wanted case has property p.
func anyCase(p func(Case) bool) bool {
	for _, c := range Cases {
		if p(c) && wanted(c) {
			return true
		}
	}
	return false
}

// report prints the table of the results, backend by backend in order,
// under a line that says when, where and on which commit they were taken.
func report(t *testing.T, tgs []Target, results map[string][]Result, started time.Time) {
	var all []Result
	for _, tg := range tgs {
		rs := results[tg.Name]
		slices.SortStableFunc(rs, func(a, b Result) int { return caseIndex(a.Case) - caseIndex(b.Case) })
		all = append(all, rs...)
	}
	os.Stdout.WriteString(provenance(started, *duration, *hog) + "\n\n")
	printTable(os.Stdout, all)
	t.Log(summary(all))
	os.Stdout.WriteString("\n" + summary(all) + "\n")
}

func selected(list, name string) bool {
	if list == "" {
		return true
	}
	for _, s := range strings.Split(list, ",") {
		if s == name {
			return true
		}
	}
	return false
}

// targets starts every backend under attack, each server behind a proxy
// that the faults control.
func targets(t *testing.T) []Target {
	rs := redistest.Start(t)
	rp := netproxy.Start(t, rs.Addr())
	es := etcdtest.Start(t)
	ep := netproxy.Start(t, es.Addr())
	ps := pgtest.Start(t)
	pp := netproxy.Start(t, ps.Addr())
	zs := zktest.Start(t)
	zp := netproxy.Start(t, zs.Addr())
	return append([]Target{
		{Name: "file", URL: "file://" + t.TempDir(), TTL: time.Second},
		{Name: "redis", URL: "redis://" + rp.Addr() + "/0", Proxy: rp, Server: rs, TTL: time.Second},
		{Name: "etcd", URL: "etcd://" + ep.Addr(), Proxy: ep, Server: es, TTL: time.Second},
		{Name: "postgres", URL: pgtest.WithHost(t, ps.URL(), pp.Addr()), Proxy: pp, Server: ps, TTL: time.Second},
		{Name: "zookeeper", URL: zktest.URL(zp.Addr()), Proxy: zp, Server: zs, TTL: time.Second},
	}, redlockTargets(t)...)
}

// redlockTargets are two sets of three Redis masters: one whose faults
// hit a majority (two masters behind one proxy, frozen and restarted
// together), every case applying; and one whose faults hit a single
// master, where the network and server cases must cost no lock.
func redlockTargets(t *testing.T) []Target {
	var tgs []Target
	for _, cut := range []int{2, 1} {
		var hosts []string
		var proxy *netproxy.Proxy
		var hit servers
		for i := range 3 {
			s := redistest.Start(t)
			switch {
			case i >= cut:
				hosts = append(hosts, s.Addr())
				continue
			case proxy == nil:
				proxy = netproxy.Start(t, s.Addr())
				hosts = append(hosts, proxy.Addr())
			default:
				hosts = append(hosts, proxy.Also(t, s.Addr()))
			}
			hit = append(hit, s)
		}
		tg := Target{Name: "redlock", URL: "redlock://" + strings.Join(hosts, ",") + "/0", Proxy: proxy, Server: hit, TTL: time.Second}
		if cut == 1 {
			tg.Name, tg.Minority, tg.Cases = "redlock-1of3", true, []string{"2-blackhole", "4-server-freeze-restart"}
		}
		tgs = append(tgs, tg)
	}
	return tgs
}

// servers freezes, thaws and restarts several servers together.
type servers []*redistest.Server

func (ss servers) Freeze() {
	for _, s := range ss {
		s.Freeze()
	}
}

func (ss servers) Thaw() {
	for _, s := range ss {
		s.Thaw()
	}
}

func (ss servers) Restart() {
	for _, s := range ss {
		s.Restart()
	}
}
