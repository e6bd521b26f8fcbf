package runner

import (
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/backend/file"
	"github.com/lockrun/lockrun/internal/memory"
)

// controlOn takes key on a file backend in a fresh directory and serves
// its control socket, closed when the test ends.
func controlOn(t *testing.T) (*control, *file.Backend, backend.Lease) {
	t.Helper()
	b, err := file.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := b.Acquire(t.Context(), "k", backend.AcquireOptions{TTL: time.Second, Holder: "h", RunID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	c := startControl(Job{Key: "k", Locker: b}, l, slog.New(slog.DiscardHandler))
	if c == nil {
		t.Fatal("no control socket")
	}
	t.Cleanup(c.close)
	return c, b, l
}

func ask(t *testing.T, c *control, op string, value string) ControlAnswer {
	t.Helper()
	ans, err := Ask(t.Context(), c.ln.Addr().String(), ControlRequest{Op: op, Value: []byte(value)})
	if err != nil {
		t.Fatal(err)
	}
	return ans
}

func TestControlAnswersForTheHolder(t *testing.T) {
	c, _, l := controlOn(t)
	if a := ask(t, c, OpCheckpointGet, ""); a.Status != StatusNone {
		t.Errorf("get before set: %+v", a)
	}
	if a := ask(t, c, OpCheckpointSet, "batch 3"); a.Status != StatusOK {
		t.Fatalf("set: %+v", a)
	}
	if a := ask(t, c, OpCheckpointGet, ""); a.Status != StatusOK || string(a.Value) != "batch 3" || a.Token != l.Token().String() {
		t.Errorf("get: %+v", a)
	}
	if a := ask(t, c, OpFenceCheck, ""); a.Status != StatusOK {
		t.Errorf("fence check: %+v", a)
	}
	if a := ask(t, c, "nonsense", ""); a.Status != StatusError || a.Kind != KindUsage {
		t.Errorf("unknown request: %+v", a)
	}
}

// The backend refuses on its own, before lockrun has noticed the loss.
func TestControlRefusesOnceTheStoreSaysLost(t *testing.T) {
	c, b, l := controlOn(t)
	if err := b.ForceRelease(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	l.Release(t.Context())
	for _, op := range []string{OpCheckpointSet, OpFenceCheck} {
		if a := ask(t, c, op, "late"); a.Status != StatusLost {
			t.Errorf("%s after the lock was broken: %+v, want lost", op, a)
		}
	}
}

func TestControlRefusesOnceTheLeaseIsLostLocally(t *testing.T) {
	c, _, _ := controlOn(t)
	lost := make(chan struct{})
	c.watch(lost)
	close(lost)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		a := ask(t, c, OpCheckpointSet, "late")
		if a.Status == StatusLost {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("set after a local loss: %+v, want lost", a)
		}
	}
}

// semaphoreControl takes key with two holders of limit 2 on one memory
// store and serves the second one's control socket.
func semaphoreControl(t *testing.T) (*control, *memory.Backend, backend.Lease) {
	t.Helper()
	b := memory.New()
	o := backend.AcquireOptions{TTL: 10 * time.Second, Holder: "h", RunID: "r1", Limit: 2}
	if _, err := b.Acquire(t.Context(), "k", o); err != nil {
		t.Fatal(err)
	}
	o.RunID = "r2"
	l, err := b.Acquire(t.Context(), "k", o)
	if err != nil {
		t.Fatal(err)
	}
	c := startControl(Job{Key: "k", Locker: b, Acquire: o}, l, slog.New(slog.DiscardHandler))
	if c == nil {
		t.Fatal("no control socket")
	}
	t.Cleanup(c.close)
	return c, b, l
}

// A semaphore's second holder is a holder too: its fence check passes
// while its own token is held, whoever is first, and fails once that one
// holder is broken.
func TestControlFenceCheckOfASemaphoreHolder(t *testing.T) {
	c, b, l := semaphoreControl(t)
	if a := ask(t, c, OpFenceCheck, ""); a.Status != StatusOK || a.Token != l.Token().String() {
		t.Fatalf("fence check of the second holder: %+v, want ok", a)
	}
	if err := b.ReleaseHolder(t.Context(), "k", l.Token()); err != nil {
		t.Fatal(err)
	}
	if a := ask(t, c, OpFenceCheck, ""); a.Status != StatusLost {
		t.Errorf("fence check after its holder was broken: %+v, want lost", a)
	}
}

// Checkpoints are a plain lock's: a semaphore run's requests are refused
// as a usage error before they reach the store.
func TestControlRefusesCheckpointsInASemaphore(t *testing.T) {
	c, _, _ := semaphoreControl(t)
	for _, op := range []string{OpCheckpointSet, OpCheckpointGet} {
		if a := ask(t, c, op, "v"); a.Status != StatusError || a.Kind != KindUsage || !strings.Contains(a.Message, "--limit 2") {
			t.Errorf("%s in a semaphore run: %+v, want a usage error naming the limit", op, a)
		}
	}
}

// TestControlDeliversNoFenceCheckAfterStop: a fence check answered just
// before stop is delivered as a refusal once stop has begun, since stop
// no longer waits for the socket's goroutines and the release follows.
func TestControlDeliversNoFenceCheckAfterStop(t *testing.T) {
	c, _, _ := controlOn(t)
	ans := c.answer(t.Context(), ControlRequest{Op: OpFenceCheck})
	if ans.Status != StatusOK {
		t.Fatalf("fence check before stop: %+v", ans)
	}
	c.stop()
	for _, op := range []string{OpFenceCheck, OpCheckpointGet} {
		got := ControlAnswer{Status: StatusOK, Token: ans.Token}
		if op == OpFenceCheck {
			got = ans
		}
		mine, theirs := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- c.deliver(mine, op, got) }()
		var read ControlAnswer
		if err := json.NewDecoder(theirs).Decode(&read); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{OpFenceCheck: StatusLost, OpCheckpointGet: StatusOK}[op]; read.Status != want {
			t.Errorf("%s made before stop, delivered after: %+v, want %s", op, read, want)
		}
	}
}
