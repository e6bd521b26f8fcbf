package zookeeper

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/netproxy"
	"github.com/lockrun/lockrun/internal/zktest"
)

// rawConn is a plain go-zookeeper client of addr, as another tool would
// use, closed when the test ends.
func rawConn(t *testing.T, addr string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect([]string{addr}, 5*time.Second, zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestUnreachableEnsembleFailsFast(t *testing.T) {
	srv := zktest.Start(t)
	srv.Stop()
	begin := time.Now()
	u := zktest.URL(srv.Addr())
	_, err := OpenURL(t.Context(), mustURL(t, u))
	if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Open of a stopped server = %v; want ErrUnavailable naming the refusal", err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("Open of a stopped server took %v; want about 0.6 s of probe retries", d)
	}
}

// TestExpiredSessionIsLost: a holder cut off until the server expired its
// session learns of it when the link comes back (go-zookeeper then opens a
// new session quietly), and another client can take the lock only after
// the lease's local deadline.
func TestExpiredSessionIsLost(t *testing.T) {
	srv := zktest.Start(t)
	px := netproxy.Start(t, srv.Addr())
	b, other, key := openTest(t, zktest.URL(px.Addr())), openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("alice", false))
	px.Hold(netproxy.Both)
	w, err := other.Acquire(t.Context(), key, opts("bob", true))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(context.Background())
	if now, deadline := time.Now(), l.Start().Add(l.TTL()); now.Before(deadline) {
		t.Fatalf("bob took the lock %v before alice's lease could end", deadline.Sub(now))
	}
	if w.Token() <= l.Token() {
		t.Errorf("token %d after an expiry is not above %d", w.Token(), l.Token())
	}
	px.Heal()
	px.Reset()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for {
		err := l.Renew(ctx)
		if errors.Is(err, backend.ErrLost) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Renew after the session expired = %v, want ErrLost", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if st, err := other.Inspect(t.Context(), key); err != nil || st.Holder != "bob" {
		t.Errorf("Inspect = %+v, %v; want held by bob", st, err)
	}
}

func TestTokensFollowTheClockAcrossAWipe(t *testing.T) {
	srv := zktest.Start(t)
	key := backendtest.Key(t)
	var last backend.Token
	for round := range 2 {
		b := openTest(t, srv.URL())
		for range 3 {
			before := time.Now().UnixMicro()
			l := backendtest.MustAcquire(t, b, key, opts("a", false))
			if l.Token() <= last || uint64(l.Token()) < uint64(before) {
				t.Errorf("round %d: token %d; want above %d and at least the clock %d µs", round, l.Token(), last, before)
			}
			last = l.Token()
			if err := l.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		b.Close()
		srv.Wipe()
	}
}

func TestMinHoldKeepsTheKeyAfterRelease(t *testing.T) {
	srv := zktest.Start(t)
	a, c, key := openTest(t, srv.URL()), openTest(t, srv.URL()), backendtest.Key(t)
	o := opts("alice", false)
	o.MinHold = 2 * time.Second
	l := backendtest.MustAcquire(t, a, key, o)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	until := time.UnixMicro(int64(l.(*lease).rec.Since)).Add(o.MinHold)
	st, err := c.Inspect(t.Context(), key)
	if err != nil || !st.Held || st.Holder != "alice" || st.Token != l.Token() || st.TTL <= 0 {
		t.Errorf("Inspect during the min-hold = %+v, %v; want held by alice with her token and time left", st, err)
	}
	if x, err := c.Acquire(t.Context(), key, opts("bob", false)); !errors.Is(err, backend.ErrHeld) {
		if x != nil {
			_ = x.Release(context.Background())
		}
		t.Fatalf("Acquire during the min-hold = %v, want ErrHeld", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	w, err := c.Acquire(ctx, key, opts("bob", true))
	if err != nil {
		t.Fatal(err)
	}
	if now := time.Now(); now.Before(until) {
		t.Errorf("a waiter got the lock %v before the min-hold ended", until.Sub(now))
	}
	if w.Token() <= l.Token() {
		t.Errorf("token %d after a min-hold is not above %d", w.Token(), l.Token())
	}
	if err := w.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Inspect(t.Context(), key); err != nil || st.Held {
		t.Errorf("after a release without min-hold, Inspect = %+v, %v; want free", st, err)
	}
}

func TestForceReleaseEndsAMinHold(t *testing.T) {
	srv := zktest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	o := opts("alice", false)
	o.MinHold = time.Minute
	l := backendtest.MustAcquire(t, b, key, o)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.ForceRelease(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	w := backendtest.MustAcquire(t, b, key, opts("bob", false))
	if w.Token() <= l.Token() {
		t.Errorf("token %d after a forced release is not above %d", w.Token(), l.Token())
	}
	_ = w.Release(t.Context())
}

func TestListAndHolderRecord(t *testing.T) {
	srv := zktest.Start(t)
	b := openTest(t, srv.URL())
	pfx := backendtest.Key(t)
	o := opts("alice", false)
	o.Info = backend.HolderInfo{User: "al", Command: "backup --full", CIURL: "https://ci/1"}
	before := time.Now()
	la := backendtest.MustAcquire(t, b, pfx+"-a", o)
	lb := backendtest.MustAcquire(t, b, pfx+"-b", opts("bob", false))
	backendtest.MustAcquire(t, b, "other-"+pfx, opts("carol", false))
	free := backendtest.MustAcquire(t, b, pfx+"-c", opts("dave", false))
	_ = free.Release(t.Context())
	time.Sleep(10 * time.Millisecond)
	if err := la.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, err := b.List(t.Context(), pfx)
	if err != nil || len(got) != 2 || got[0].Key != pfx+"-a" || got[1].Key != pfx+"-b" {
		t.Fatalf("List(%q) = %+v, %v; want the two held keys, sorted", pfx, got, err)
	}
	a := got[0]
	if a.Holder != "alice" || a.Info != o.Info || a.Token != la.Token() || a.Since.Before(before.Truncate(time.Microsecond)) || !a.Renewed.After(a.Since) {
		t.Errorf("alice's record = %+v; want her holder info, token %d, since after %v and a later renewal", a, la.Token(), before)
	}
	if got[1].Token != lb.Token() {
		t.Errorf("bob's token in List = %d, want %d", got[1].Token, lb.Token())
	}
}

// TestCuratorLayout: a contender that Curator's InterProcessMutex would
// write on the same lock path (a protected ephemeral sequential node named
// "_c_<uuid>-lock-") excludes lockrun, and lockrun's own node is named so
// that Curator, which sorts by what follows the last "lock-", sees it in
// its place in the queue.
func TestCuratorLayout(t *testing.T) {
	srv := zktest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	raw := rawConn(t, srv.Addr())
	l := backendtest.MustAcquire(t, b, key, opts("alice", false))
	kids, _, err := raw.Children("/lockrun/" + key)
	if err != nil || len(kids) != 1 || !strings.HasPrefix(kids[0], "_c_") || !strings.Contains(kids[0], "-lock-") {
		t.Fatalf("lockrun's node = %v, %v; want one _c_...-lock-<seq> node", kids, err)
	}
	_ = l.Release(t.Context())
	curator, err := raw.Create("/lockrun/"+key+"/_c_0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0-lock-", []byte("10.0.0.7"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(t.Context(), key, opts("alice", false))
	var held *backend.HeldError
	if !errors.As(err, &held) || !strings.Contains(held.Status.Holder, "-lock-") {
		t.Fatalf("Acquire beside a Curator holder = %v; want ErrHeld naming its node", err)
	}
	got := make(chan error, 1)
	go func() {
		w, err := b.Acquire(t.Context(), key, opts("bob", true))
		if err == nil {
			err = w.Release(context.Background())
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a waiter took the lock while Curator held it: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := raw.Delete(curator, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not get the lock after Curator's node went")
	}
}

func TestTTLAboveTheServersMaximumIsAConfigError(t *testing.T) {
	srv := zktest.Start(t)
	o := opts("alice", false)
	o.TTL = 10 * time.Minute // zktest allows two minutes
	_, err := openTest(t, srv.URL()).Acquire(t.Context(), backendtest.Key(t), o)
	if !errors.Is(err, backend.ErrConfig) || !strings.Contains(err.Error(), "maxSessionTimeout") {
		t.Errorf("Acquire with a TTL above maxSessionTimeout = %v, want ErrConfig naming it", err)
	}
}

// TestDefaultTTLRunUsesOneSession: a run with lockrun's default TTL takes
// over the session that Open opened, once; status works after it, on the
// lease's session, and a second lease gets a new one.
func TestDefaultTTLRunUsesOneSession(t *testing.T) {
	srv := zktest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	opened := b.admin
	o := opts("alice", false)
	o.TTL = DefaultTTL
	l := backendtest.MustAcquire(t, b, key, o)
	if l.(*lease).s != opened {
		t.Error("a default-TTL Acquire opened a second session instead of taking Open's")
	}
	if st, err := b.Inspect(t.Context(), key); err != nil || st.Holder != "alice" || b.admin != nil {
		t.Errorf("Inspect after the takeover = %+v, %v (own session %p); want alice, on the lease's session", st, err, b.admin)
	}
	o2 := opts("bob", false)
	o2.TTL = DefaultTTL
	l2 := backendtest.MustAcquire(t, b, backendtest.Key(t), o2)
	if s := l2.(*lease).s; s == opened || s == b.admin {
		t.Error("a second lease shares a session")
	}
	for _, l := range []backend.Lease{l, l2} {
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := b.Inspect(t.Context(), key); err != nil || st.Held {
		t.Errorf("Inspect after release = %+v, %v; want free", st, err)
	}
}

// A run with another TTL opens a session of its own for its lease, and
// Open's session, which nothing used, is closed then: the run pings the
// ensemble from one session, and its checkpoints and status go through
// the lease's. Once the lease is gone, status opens a session again.
func TestOtherTTLRunUsesOneSession(t *testing.T) {
	srv := zktest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	opened := b.admin
	o := opts("alice", false)
	o.TTL = 3 * time.Second
	l := backendtest.MustAcquire(t, b, key, o)
	if !opened.lost() || b.admin != nil {
		t.Errorf("after an Acquire of another TTL, Open's unused session is still open (lost %v, own session %p)", opened.lost(), b.admin)
	}
	if err := b.SetCheckpoint(t.Context(), key, l.Token(), []byte("step 1")); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Inspect(t.Context(), key); err != nil || st.Holder != "alice" || b.admin != nil {
		t.Errorf("Inspect while holding = %+v, %v (own session %p); want alice, on the lease's session", st, err, b.admin)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Inspect(t.Context(), key); err != nil || st.Held || b.admin == nil || b.admin.lost() {
		t.Errorf("Inspect after release = %+v, %v; want free, on a new session of the backend's own", st, err)
	}
}

// A session that a request of the backend's own used is not closed under
// it by an Acquire of another TTL.
func TestUsedSessionIsKept(t *testing.T) {
	srv := zktest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	if _, err := b.Inspect(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	opened := b.admin
	o := opts("alice", false)
	o.TTL = 3 * time.Second
	l := backendtest.MustAcquire(t, b, key, o)
	defer l.Release(t.Context())
	if opened.lost() || b.admin != opened {
		t.Error("an Acquire of another TTL closed the session a status had used")
	}
}

// TestWaiterSleepsThroughRenewals: the next in line watches the holder's
// node, which every renewal writes. It sets its watch again, one request
// a renewal, rather than reading the whole queue each time as well.
func TestWaiterSleepsThroughRenewals(t *testing.T) {
	srv := zktest.Start(t)
	px := netproxy.Start(t, srv.Addr())
	holder, waiter, key := openTest(t, srv.URL()), openTest(t, zktest.URL(px.Addr())), backendtest.Key(t)
	o, wo := opts("alice", false), opts("bob", true)
	o.TTL, wo.TTL = 10*time.Second, 10*time.Second // pings 3 s apart, none or one in the window
	l := backendtest.MustAcquire(t, holder, key, o)
	got := make(chan error, 1)
	go func() {
		w, err := waiter.Acquire(t.Context(), key, wo)
		if err == nil {
			err = w.Release(context.Background())
		}
		got <- err
	}()
	c := rawConn(t, srv.Addr())
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if kids, _, err := c.Children(holder.lockPath(key)); err == nil && len(kids) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("bob did not queue within 5 s")
		}
	}
	before := quiet(px) // bob's watch is set, Open's spare session closed
	const renewals = 10
	for range renewals {
		if err := l.Renew(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // bob's watch fires, and is set again, before the next
	}
	time.Sleep(100 * time.Millisecond)
	// Two requests a renewal fail this; one and a ping or two pass.
	if sent := px.Traffic(netproxy.Up).Chunks - before; sent > renewals+3 {
		t.Errorf("bob sent %d requests while alice renewed %d times; want one a renewal (and perhaps a ping)", sent, renewals)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Errorf("bob's turn after alice's release: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("bob did not take the lock within 5 s of alice's release")
	}
}

// quiet waits until nothing went up through px for 300 ms, and returns
// the count of chunks sent so far.
func quiet(px *netproxy.Proxy) int64 {
	last, since := px.Traffic(netproxy.Up).Chunks, time.Now()
	for time.Since(since) < 300*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
		if n := px.Traffic(netproxy.Up).Chunks; n != last {
			last, since = n, time.Now()
		}
	}
	return last
}

// TestRenewalIsOneRequest: a holder renewing every third of its TTL sends
// its renewals and no pings besides (see sniffConn.Write); an idle
// session still pings.
func TestRenewalIsOneRequest(t *testing.T) {
	srv := zktest.Start(t)
	px := netproxy.Start(t, srv.Addr())
	b, key := openTest(t, zktest.URL(px.Addr())), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("alice", false))
	every := l.TTL() / 3
	before := quiet(px)
	const renewals = 9
	for range renewals {
		time.Sleep(every)
		if err := l.Renew(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if sent := px.Traffic(netproxy.Up).Chunks - before; sent > renewals+1 {
		t.Errorf("%d renewals a third of the TTL apart sent %d packets; want one each", renewals, sent)
	}
	before = px.Traffic(netproxy.Up).Chunks
	time.Sleep(2 * l.TTL())
	if sent := px.Traffic(netproxy.Up).Chunks - before; sent < 3 {
		t.Errorf("an idle session sent %d packets in two TTLs; want its pings", sent)
	}
	if err := l.Renew(t.Context()); err != nil {
		t.Errorf("Renew after two idle TTLs = %v", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestPutOffPingKeepsTheReadDeadline: a ping put off after a request goes
// out a whole ping interval P after it, as go-zookeeper's own would have,
// so replies slowed by 0.3 P keep within its read deadline (2 P after the
// last packet received). A ping dropped outright left 0.1 P, and the
// client reconnected.
func TestPutOffPingKeepsTheReadDeadline(t *testing.T) {
	srv := zktest.Start(t)
	px := netproxy.Start(t, srv.Addr())
	cfg := Config{Servers: []string{px.Addr()}, DialTimeout: 5 * time.Second, RequestTimeout: 5 * time.Second, TickTime: zktest.TickTime}
	s, err := connect(t.Context(), cfg, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	p := s.timeout / 3
	// Wait for a ping tick: the next chunk up.
	n := px.Traffic(netproxy.Up).Chunks
	for px.Traffic(netproxy.Up).Chunks == n {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(p * 15 / 100)
	if _, _, err := s.conn.Exists("/"); err != nil {
		t.Fatal(err)
	}
	px.SetLatency(netproxy.Down, p*3/10)
	disconnected := false
	for end := time.Now().Add(p * 3); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if st := s.conn.State(); st != zk.StateHasSession && st != zk.StateConnected {
			disconnected = true
		}
	}
	if c := px.Connections(); disconnected || c != 1 {
		t.Errorf("the client lost its connection (state seen: disconnected=%v; %d connections) after replies slowed by 0.3 of the ping interval", disconnected, c)
	}
}
