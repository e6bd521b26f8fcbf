package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/pgtest"
)

// Plain and semaphore acquirers racing for a free key: the winners all
// asked for one limit, never more than it, and every loser is told why.
func TestLimitsRaceForAFreeKey(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	const n, limit = 12, 3
	clients := make([]*Backend, n)
	for i := range clients {
		clients[i] = open(t, raw)
	}
	for round := range 8 {
		key := fmt.Sprint("k", round)
		var mu sync.Mutex
		won := map[int][]backend.Lease{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, c := range clients {
			want := []int{1, limit}[i%2]
			wg.Go(func() {
				<-start
				l, err := c.Acquire(t.Context(), key, semOpts(fmt.Sprint("h", i), want))
				var held *backend.HeldError
				var mix *backend.LimitError
				switch {
				case err == nil:
					mu.Lock()
					won[want] = append(won[want], l)
					mu.Unlock()
				case errors.As(err, &mix) && mix.Want == want && mix.Have == limit+1-want:
				case errors.As(err, &held):
				default:
					t.Errorf("round %d, limit %d: %v", round, want, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(won) != 1 || len(won[1]) > 1 || len(won[limit]) > limit {
			t.Fatalf("round %d: winners by limit %v; want one limit, within it", round, counts(won))
		}
		for _, ls := range won {
			for _, l := range ls {
				if err := l.Release(t.Context()); err != nil {
					t.Error(err)
				}
			}
		}
	}
}

func counts(m map[int][]backend.Lease) map[int]int {
	c := map[int]int{}
	for k, v := range m {
		c[k] = len(v)
	}
	return c
}

// Many first users of a key at once: the row is inserted once, and
// exactly limit of them get a slot, each with its own token.
func TestSemaphoreFirstUseByMany(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	const n, limit = 16, 3
	var mu sync.Mutex
	tokens := map[backend.Token]bool{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		b := open(t, raw)
		wg.Go(func() {
			<-start
			l, err := b.Acquire(t.Context(), "k", semOpts(fmt.Sprint("h", i), limit))
			if errors.Is(err, backend.ErrHeld) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if tokens[l.Token()] {
				t.Errorf("token %d issued twice", l.Token())
			}
			tokens[l.Token()] = true
		})
	}
	close(start)
	wg.Wait()
	if len(tokens) != limit {
		t.Errorf("%d of %d first users got a slot of a semaphore of %d", len(tokens), n, limit)
	}
}

// Renewals, releases and grants of one semaphore's holders at once each
// rewrite the one row: none may work on a version another has replaced,
// or a released holder would come back, or a grant or renewal be lost.
func TestConcurrentWritesToASemaphoreLoseNothing(t *testing.T) {
	raw := pgtest.Isolated(t, pgtest.Shared())
	const limit, n = 30, 10 // n holders renew, n release, n are granted
	b := open(t, raw)
	leases := make([]backend.Lease, 2*n)
	for i := range leases {
		o := semOpts(fmt.Sprint("h", i), limit)
		o.TTL = time.Minute
		l, err := b.Acquire(t.Context(), "k", o)
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	time.Sleep(time.Second)
	renewed := time.Now()
	var wg sync.WaitGroup
	start := make(chan struct{})
	granted := make([]backend.Lease, n)
	for i := range n {
		c := open(t, raw)
		wg.Go(func() {
			<-start
			if err := leases[i].Renew(t.Context()); err != nil {
				t.Errorf("renew %d: %v", i, err)
			}
		})
		wg.Go(func() {
			<-start
			if err := leases[n+i].Release(t.Context()); err != nil {
				t.Errorf("release %d: %v", n+i, err)
			}
		})
		wg.Go(func() {
			<-start
			o := semOpts(fmt.Sprint("new", i), limit)
			o.TTL = time.Minute
			l, err := c.Acquire(t.Context(), "k", o)
			if err != nil {
				t.Errorf("grant %d: %v", i, err)
			}
			granted[i] = l
		})
	}
	close(start)
	wg.Wait()
	want := map[backend.Token]bool{}
	for _, l := range append(leases[:n:n], granted...) {
		if l != nil {
			want[l.Token()] = true
		}
	}
	st, err := b.Inspect(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	renewers := map[backend.Token]bool{}
	for _, l := range leases[:n] {
		renewers[l.Token()] = true
	}
	for _, h := range st.Holders {
		if !want[h.Token] {
			t.Errorf("holder %d (run %s) is live after its release", h.Token, h.RunID)
		}
		delete(want, h.Token)
		if renewers[h.Token] && h.Renewed.Before(renewed.Add(-50*time.Millisecond)) {
			t.Errorf("holder %s's renewal was lost: renewed %v", h.Holder, h.Renewed)
		}
	}
	if len(want) > 0 {
		t.Errorf("%d holders missing after concurrent writes: %v", len(want), want)
	}
}
