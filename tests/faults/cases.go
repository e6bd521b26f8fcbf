package faults

import (
	"context"
	"os/exec"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/lockruntest"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/procfs"
)

// Server is a backend server the harness can freeze and restart.
type Server interface {
	Freeze()
	Thaw()
	Restart()
}

// Target is one backend under attack.
type Target struct {
	Name   string
	URL    string          // lockrun's --backend, through Proxy when there is one
	Proxy  *netproxy.Proxy // nil when the backend has no network link
	Server Server          // nil when there is no server
	TTL    time.Duration
	// Minority says that Proxy and Server reach fewer than a majority of
	// the backend's servers (a Redlock master): the faults must cost no
	// lock, and only the cases named in Cases run.
	Minority bool
	Cases    []string // case names to run; nil: all that apply
}

// Case is one fault and what must hold under it.
type Case struct {
	Name        string
	Net         bool          // needs a network link to cut
	Mode        string        // the command's mode, see faultchild
	Hold        time.Duration // how long each command runs
	Competitors int
	Busy        int           // competitors more without --wait (see Fleet.Busy)
	MayOverlap  bool          // the fault freezes the holder's whole machine
	MustLose    bool          // the fault must make some lockrun exit 76
	MinDuration time.Duration // shortest run in which the fault can bite
	Quiet       bool          // no fault: no lock may be lost, and MinRuns commands must run
	MinRuns     int           // with Quiet: fewer commands run means the case did not run
	Hog         bool          // runs beside a busy loop on every core (see faultRun.all)
	Hooked      bool          // needs lockrun built with the testhooks tag
	BlockStderr bool          // lockrun's stderr is a full pipe nobody reads
	Env         []string      // more environment for lockrun
	Limit       int           // --limit: above 1, a semaphore; see -faults.semaphores
	TTL         time.Duration // the commands' --ttl, when not the target's
	Fault       func(ctx context.Context, a *attack)
}

// Cases are the faults of the harness, in the order of the issue.
var Cases = []Case{
	{Name: "1-no-fault", Hold: 20 * time.Millisecond, Competitors: 5, Quiet: true, MinRuns: 10},
	{Name: "2-blackhole", Net: true, Hold: time.Hour, Competitors: 3, MustLose: true, Fault: blackhole},
	{Name: "3-latency", Net: true, Hold: 1500 * time.Millisecond, Competitors: 3, MustLose: true, MinDuration: 8 * time.Second, Fault: latency},
	{Name: "4-server-freeze-restart", Net: true, Hold: time.Hour, Competitors: 3, MustLose: true, MinDuration: 4 * time.Second, Fault: freezeServer},
	{Name: "5-slow-acquire-reply", Net: true, Hold: 200 * time.Millisecond, Competitors: 2, MinDuration: 10 * time.Second, Fault: slowReplies},
	{Name: "6-lockrun-sigkill", Mode: "escape", Hold: time.Hour, Competitors: 3, Fault: killLockrun},
	{Name: "7-lockrun-frozen", Hold: time.Hour, Competitors: 3, MustLose: true, Fault: freezeLockrun},
	{Name: "8-machine-paused", Hold: time.Hour, Competitors: 3, MayOverlap: true, MustLose: true, MinDuration: 4 * time.Second, Fault: pauseMachine},
	{Name: "9-stubborn-escaping-child", Mode: "escape", Hold: 2 * time.Second, Competitors: 3, MustLose: true, MinDuration: 4 * time.Second, Fault: loseRepeatedly},
	{Name: "10-freeze-before-exec", Hold: time.Hour, Competitors: 2, Hooked: true, Env: []string{hookEnv}, Fault: freezeBeforeExec},
	{Name: "11-watchdog-killed-then-frozen", Hold: time.Hour, Competitors: 3, MustLose: true, Fault: killWatchdogThenFreeze},
	{Name: "12-blocked-stderr-release", Mode: "stubborn", Hold: time.Hour, Competitors: 1, BlockStderr: true, MustLose: true, Fault: releaseUnderBlockedStderr},
	// A 3s TTL: at the targets' 1s a renewal has 700 ms to get through
	// before the command is told to stop, which a server starved beside
	// the loops on a slow host missed now and then (etcd, two requests).
	{Name: "13-cpu-pressure", Hold: 20 * time.Millisecond, Competitors: 5, Quiet: true, MinRuns: 5, MinDuration: 4 * time.Second, Hog: true, TTL: 3 * time.Second},
	// Semaphores: never more than --limit commands alive at once, and each
	// holder killed before its own lease can end while the others run on.
	{Name: "14-semaphore-no-fault", Limit: 3, Hold: 50 * time.Millisecond, Competitors: 6, Quiet: true, MinRuns: 10},
	{Name: "15-semaphore-lockrun-sigkill", Limit: 2, Mode: "escape", Hold: time.Hour, Competitors: 4, Fault: killLockrun},
	{Name: "16-semaphore-lockrun-frozen", Limit: 2, Hold: time.Hour, Competitors: 4, MustLose: true, Fault: freezeLockrun},
	// Runs without --wait beside the waiters, as cron jobs on a fleet: a
	// contender that finds the lock busy joins and leaves the queue (or
	// reads it) while holders hand over, and sometimes takes it between
	// two. Quiet, then with the holder SIGKILLed: its lease runs out while
	// they keep trying, and none may start before its command is dead.
	{Name: "17-busy-contenders", Hold: 20 * time.Millisecond, Competitors: 3, Busy: 2, Quiet: true, MinRuns: 5},
	{Name: "18-busy-contenders-lockrun-sigkill", Mode: "escape", Hold: time.Hour, Competitors: 2, Busy: 2, Fault: killLockrun},
}

// blackhole holds requests, then replies, for longer than the TTL, then
// resets every connection.
func blackhole(ctx context.Context, a *attack) {
	for ctx.Err() == nil {
		for _, dir := range []netproxy.Direction{netproxy.Up, netproxy.Down} {
			if _, _, err := a.fleet.Holder(ctx); err != nil {
				return
			}
			a.tg.Proxy.Hold(dir)
			sleep(ctx, a.tg.TTL*3/2)
			a.tg.Proxy.Heal()
		}
		if _, _, err := a.fleet.Holder(ctx); err != nil {
			return
		}
		a.tg.Proxy.Reset()
	}
}

// latency first adds round trips well within the margin (no lockrun may
// lose), then, under a running command, round trips of twice the
// heartbeat: its lockrun must lose, in time.
func latency(ctx context.Context, a *attack) {
	hb := a.tg.TTL / 3
	a.tg.Proxy.SetLatency(netproxy.Both, hb/8)
	sleep(ctx, a.duration/2)
	// A command that just started, so that it still runs when the
	// slowed renewals fail.
	if _, _, err := a.fleet.HolderSince(ctx, time.Now()); err != nil {
		return
	}
	a.phase = time.Now()
	a.tg.Proxy.SetLatency(netproxy.Both, hb)
	<-ctx.Done()
	a.tg.Proxy.SetLatency(netproxy.Both, 0)
}

// freezeServer stops the server (SIGSTOP) past the TTL, then restarts it.
func freezeServer(ctx context.Context, a *attack) {
	for ctx.Err() == nil {
		if _, _, err := a.fleet.Holder(ctx); err != nil {
			return
		}
		a.tg.Server.Freeze()
		sleep(ctx, a.tg.TTL*3/2)
		a.tg.Server.Thaw()
		if _, _, err := a.fleet.Holder(ctx); err != nil {
			return
		}
		a.tg.Server.Restart()
	}
}

// slowReplies delays every reply beyond the TTL: a grant arrives too late
// to be used, and no command may start on it.
func slowReplies(ctx context.Context, a *attack) {
	a.tg.Proxy.SetLatency(netproxy.Down, a.tg.TTL*6/5)
	<-ctx.Done()
	a.tg.Proxy.SetLatency(netproxy.Down, 0)
}

// killLockrun SIGKILLs the holder's lockrun: its command must die at once
// (100 ms: the kernel's parent-death signal), and everything the command
// started soon after (the watchdog's reaction: a second at most).
func killLockrun(ctx context.Context, a *attack) {
	for ctx.Err() == nil {
		h, l, err := a.fleet.Holder(ctx)
		if err != nil {
			return
		}
		killed := time.Now()
		_ = syscall.Kill(h.PID, syscall.SIGKILL)
		if pidAliveAt(l.pid, killed.Add(100*time.Millisecond)) {
			died := waitDeath(l.pid, time.Second)
			a.res.failf("the command of a SIGKILLed lockrun was alive 100ms on (seen dead after %v)", died.Sub(killed).Round(time.Millisecond))
		}
		if runAliveAt(l, killed.Add(time.Second)) {
			end, _ := a.waitEnd(l.token, time.Second)
			a.res.failf("what the command of a SIGKILLed lockrun started was alive 1s on (seen dead after %v)", end.Sub(killed).Round(time.Millisecond))
		}
		if next, ok := a.nextGrant(h.Token, a.tg.TTL+2*time.Second); ctx.Err() == nil && (!ok || next.Sub(killed) > a.tg.TTL+time.Second) {
			a.res.failf("lock of a SIGKILLed holder not free within its %v TTL", a.tg.TTL)
		}
	}
}

// freezeLockrun stops the holder's lockrun alone past the TTL: its
// watchdog must kill the command by the deadline.
func freezeLockrun(ctx context.Context, a *attack) {
	for ctx.Err() == nil {
		h, l, err := a.fleet.Holder(ctx)
		if err != nil {
			return
		}
		stopped := time.Now()
		_ = syscall.Kill(h.PID, syscall.SIGSTOP)
		alive := runAliveAt(l, stopped.Add(a.tg.TTL))
		end, _ := a.waitEnd(l.token, a.tg.TTL)
		_ = syscall.Kill(h.PID, syscall.SIGCONT)
		if alive {
			a.res.failf("command of a frozen lockrun %s", a.pastFreeze(h, stopped, end))
		}
	}
}

// pauseMachine freezes the holder's lockrun, watchdog and command together
// past the TTL, as a VM pause would. Others may take the lock meanwhile;
// fencing must reject the old command's writes, and it must die at once
// when the machine resumes.
func pauseMachine(ctx context.Context, a *attack) {
	for ctx.Err() == nil {
		h, l, err := a.fleet.Holder(ctx)
		if err != nil {
			return
		}
		frozen := append([]int{h.PID}, procfs.Descendants(h.PID)...)
		signalAll(frozen, syscall.SIGSTOP)
		sleep(ctx, a.tg.TTL*3/2)
		resumed := time.Now()
		signalAll(frozen, syscall.SIGCONT)
		if runAliveAt(l, resumed.Add(200*time.Millisecond)) {
			end, _ := a.waitEnd(l.token, 2*time.Second)
			a.res.failf("command alive 200ms after the machine resumed (seen dead after %v)", end.Sub(resumed).Round(time.Millisecond))
		}
	}
}

// loseRepeatedly takes the lock away from each holder: by cutting its link
// for longer than the TTL, or with `lockrun release` on the file backend.
func loseRepeatedly(ctx context.Context, a *attack) {
	for ctx.Err() == nil {
		if _, _, err := a.fleet.Holder(ctx); err != nil {
			return
		}
		if a.tg.Proxy == nil {
			_ = exec.Command(a.fleet.Lockrun, "release", "--backend", a.tg.URL, a.fleet.Key).Run()
		} else {
			a.tg.Proxy.Hold(netproxy.Both)
			sleep(ctx, a.tg.TTL*3/2)
			a.tg.Proxy.Heal()
		}
		sleep(ctx, a.tg.TTL)
	}
}

// waitDeath waits, at most within, for pid to be dead (or a zombie) and
// returns when it saw so.
func waitDeath(pid int, within time.Duration) time.Time {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if !lockruntest.Alive(pid) {
			break
		}
	}
	return time.Now()
}

func signalAll(pids []int, sig syscall.Signal) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
