package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/procfs"
)

// The footprint measure holds a lock with footprintTTL, which renews
// every second for lockrun and for etcdctl lock alike (both at TTL/3),
// and counts over windows of footprintWindow.
const (
	footprintTTL    = 3 * time.Second
	footprintWindow = 3 * time.Second
)

// footprint is what holding a lock, and waiting for one, costs.
type footprint struct {
	rss, watchdogRSS     int64   // peak RSS (VmHWM) of the holder and its other child, kB
	pss, watchdogPSS     int64   // proportional set size of both while holding, kB
	holdRate, waitRate   float64 // server requests per second: holding; one more waiter
	holdWake, waitWake   float64 // context switches per second: the holder; the waiter
	renewals, perRenewal float64 // renewals in a window; requests per renewal
	exe                  string  // the program holding: lockrun starts a server backend's in its place
}

// footprint holds a lock with each tool while its command sleeps, then
// adds a waiter, and reads memory, server requests and wake-ups.
func (e *env) footprint(tgs []target) *table {
	t := &table{
		title: "5. Footprint of one held lock",
		note: fmt.Sprintf("A tool holds a lock with `--ttl %v` (renewal every %v) while its command sleeps; then a second one waits for it. "+
			"Peak RSS is VmHWM while the command runs (lockrun's watchdog in brackets); PSS is the proportional set size "+
			"(smaps_rollup) of the tool and its watchdog together while it holds the lock, before the waiter starts (each in brackets). Requests and wake-ups (context switches, "+
			"all threads) are counted over %v windows; per minute at lockrun's default `--ttl 30s` (one renewal every 10 s).",
			footprintTTL, footprintTTL/3, footprintWindow),
		head: []string{"backend", "tool", "binary", "peak RSS holding", "PSS holding", "requests/renewal", "requests/min held, default ttl",
			"requests/min per waiter", "wake-ups/s holding", "wake-ups/s waiting"},
	}
	for _, tg := range tgs {
		for _, tl := range []tool{tg.peer, tg.lockrun} {
			f := e.holdAndWait(tg, tl)
			rss, pss := mib(f.rss), mib(f.pss+f.watchdogPSS)
			if f.watchdogRSS > 0 {
				rss += " (+" + mib(f.watchdogRSS) + ")"
				pss += " (" + mib(f.pss) + " + " + mib(f.watchdogPSS) + ")"
			}
			perRenewal, perMinute, waiting := "—", "—", "—"
			if tg.served != nil {
				waiting = num(round1(f.waitRate * 60))
			}
			if tg.served != nil && tl.renews {
				perRenewal = num(round1(f.perRenewal))
			}
			if tg.served != nil && tl.name == "lockrun" {
				perMinute = num(round1(f.perRenewal * 6))
			}
			binary := size(tl.binary)
			if tl.name == "lockrun" {
				binary = program(f.exe, tl.binary)
			}
			t.add(tg.name, "`"+tl.name+"`", binary, rss, pss, perRenewal, perMinute, waiting,
				num(round1(f.holdWake)), num(round1(f.waitWake)))
		}
	}
	return t
}

// holdAndWait measures tl holding a lock on a new key, then with a waiter.
// A tool that does not renew keeps its default lease, which outlasts the
// measure.
func (e *env) holdAndWait(tg target, tl tool) footprint {
	key := e.key("footprint")
	ttl := footprintTTL
	if !tl.renews {
		ttl = 0
	}
	holder, err := startStamped(tl.cmd(key, ttl, e.stampArgs("-hold", "10s")...))
	if err != nil {
		e.tb.Fatal(err)
	}
	defer holder.kill()
	pid := holder.cmd.Process.Pid
	var f footprint
	f.exe, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	time.Sleep(footprintWindow / 6)
	requests, wakes := e.window(tg, pid)
	f.holdRate, f.holdWake = requests, wakes[0]
	f.renewals = footprintWindow.Seconds() / (footprintTTL / 3).Seconds()
	f.perRenewal = requests * footprintWindow.Seconds() / f.renewals
	// Alone: a waiter of the same binary would share its pages, and halve
	// what PSS counts for each.
	f.pss, f.watchdogPSS = holdingPSS(holder)

	argv := tl.cmd(key, ttl, "true")
	waiter := exec.Command(argv[0], argv[1:]...)
	if err := waiter.Start(); err != nil {
		e.tb.Fatal(describe(argv, err))
	}
	defer func() {
		_ = waiter.Process.Signal(syscall.SIGTERM) // a waiter gives up and cleans up
		_ = waiter.Wait()
	}()
	time.Sleep(footprintWindow / 6)
	requests, wakes = e.window(tg, pid, waiter.Process.Pid)
	f.waitRate, f.waitWake = requests-f.holdRate, wakes[1]
	f.rss, f.watchdogRSS = holdingRSS(holder)
	return f
}

// program is the size of the program that held the lock, named when it is
// not the one started (a server backend's, started by lockrun in its place).
func program(exe, started string) string {
	if exe == "" || exe == started {
		return size(started)
	}
	return "`" + filepath.Base(exe) + "` " + size(exe)
}

// holdingPSS is the proportional set size (kB) of a tool holding a lock,
// and of its other child beside the command (lockrun's watchdog), if any:
// what they cost the machine together, pages they share counted once.
func holdingPSS(p *proc) (holder, other int64) {
	pid := p.cmd.Process.Pid
	for _, c := range children(pid) {
		if c != p.child {
			other = rollupKB(c, "Pss")
		}
	}
	return rollupKB(pid, "Pss"), other
}

// rollupKB reads a "kB" field of /proc/PID/smaps_rollup; 0 when the
// process is gone.
func rollupKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	return fieldValue(string(b), field)
}

// holdingRSS is the peak RSS (VmHWM, kB) so far of a tool holding a lock,
// and of its other child beside the command (lockrun's watchdog), if any.
func holdingRSS(p *proc) (holder, other int64) {
	pid := p.cmd.Process.Pid
	for _, c := range children(pid) {
		if c != p.child {
			other = statusKB(c, "VmHWM")
		}
	}
	return statusKB(pid, "VmHWM"), other
}

// peakRSS holds a lock with tl past its first renewal, and returns
// holdingRSS then.
func (e *env) peakRSS(tl tool) (holder, other int64) {
	p, err := startStamped(tl.cmd(e.key("rss"), footprintTTL, e.stampArgs("-hold", "5s")...))
	if err != nil {
		e.tb.Fatal(err)
	}
	defer p.kill()
	time.Sleep(footprintTTL/3 + footprintTTL/10)
	return holdingRSS(p)
}

// window returns the server's requests per second over one window, and
// the context switches per second of each of pids.
func (e *env) window(tg target, pids ...int) (float64, []float64) {
	r0 := count(tg.served)
	w0 := make([]int64, len(pids))
	for i, p := range pids {
		w0[i] = procfs.Switches(p)
	}
	time.Sleep(footprintWindow)
	secs := footprintWindow.Seconds()
	wakes := make([]float64, len(pids))
	for i, p := range pids {
		wakes[i] = float64(procfs.Switches(p)-w0[i]) / secs
	}
	return float64(count(tg.served)-r0) / secs, wakes
}

// size formats the size of a file.
func size(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "—"
	}
	return mib(fi.Size() / 1024)
}
