package faults

import (
	"flag"
	"os"
	"slices"
	"strings"
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
	duration = flag.Duration("faults.duration", 4*time.Second, "how long each case runs on each backend")
	only     = flag.String("faults.backends", "", "comma-separated backends to attack (default: all)")
	cases    = flag.String("faults.cases", "", "comma-separated case numbers to run (default: all)")
)

// TestFaults runs every case on every backend and fails on any overlap
// where lockrun's timers ran, any stale write accepted, any late kill, any
// orphan, and any fault that did not bite.
func TestFaults(t *testing.T) {
	lockrun := lockruntest.Binary(t)
	child := lockruntest.Build(t, "tests/faults/faultchild")
	var results []Result
	for _, tg := range targets(t) {
		if !selected(*only, tg.Name) {
			continue
		}
		for _, c := range Cases {
			if !selected(*cases, c.Name[:strings.IndexByte(c.Name, '-')]) || c.Net && tg.Proxy == nil || c.Fault == nil && c.Name != "1-no-fault" {
				continue
			}
			if (c.Name == "4-server-freeze-restart") && tg.Server == nil || tg.Cases != nil && !slices.Contains(tg.Cases, c.Name) {
				continue
			}
			t.Run(tg.Name+"/"+c.Name, func(t *testing.T) {
				r := Run(tg, c, lockrun, child, *duration)
				results = append(results, r)
				for _, f := range r.Failures {
					t.Error(f)
				}
			})
		}
	}
	printTable(os.Stdout, results)
	t.Log(summary(results))
	os.Stdout.WriteString(summary(results) + "\n")
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
