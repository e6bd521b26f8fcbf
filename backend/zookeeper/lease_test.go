package zookeeper

import (
	"sync"
	"testing"

	"github.com/lockrun/lockrun/internal/backendtest"
	"github.com/lockrun/lockrun/internal/zktest"
)

// TestAccessorsWhileRenewing reads a held lease's token, TTL and start
// while another goroutine renews it, as the runner's heartbeat and its
// control socket do: under -race an accessor that reads what Renew
// rewrites without l.mu fails, and the token must never change.
func TestAccessorsWhileRenewing(t *testing.T) {
	srv := zktest.Start(t)
	b, key := openTest(t, srv.URL()), backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, opts("alice", false))
	defer l.Release(t.Context())
	want := l.Token()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for range 20 {
			if err := l.Renew(t.Context()); err != nil {
				t.Errorf("Renew: %v", err)
				return
			}
		}
	})
	for reads := 0; ; reads++ {
		select {
		case <-done:
			wg.Wait()
			if reads == 0 {
				t.Fatal("no read overlapped the renewals")
			}
			return
		default:
		}
		if got := l.Token(); got != want {
			t.Fatalf("Token() = %v while renewing; want %v, the grant's", got, want)
		}
		if l.TTL() <= 0 || l.Start().IsZero() {
			t.Fatalf("TTL() = %v, Start() = %v while renewing", l.TTL(), l.Start())
		}
	}
}
