package clock

import (
	"sync"
	"time"
)

// Runtime is Go's own clock (time.Now, timers): CLOCK_MONOTONIC, which does
// not count suspend. Tests in virtual time (testing/synctest) use it, since
// synctest fakes Go's clock and cannot fake the kernel's.
var Runtime Clock = runtime{}

type runtime struct{}

func (runtime) Now() time.Time { return time.Now() }

func (runtime) At(t time.Time) (<-chan struct{}, func()) {
	c := make(chan struct{})
	timer := time.AfterFunc(time.Until(t), func() { close(c) })
	return c, func() { timer.Stop() }
}

// Fake is a clock that moves only when told, for tests: Advance by more
// than a timer's delay is a suspend, after which every due waiter wakes
// at once.
type Fake struct {
	mu    sync.Mutex
	now   time.Time
	waits map[*fakeWait]struct{}
}

type fakeWait struct {
	at time.Time
	c  chan struct{}
}

// NewFake returns a clock that reads start until advanced.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, waits: map[*fakeWait]struct{}{}}
}

// Now is the fake's current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// At wakes when Advance reaches t.
func (f *Fake) At(t time.Time) (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &fakeWait{at: t, c: make(chan struct{})}
	if !f.now.Before(t) {
		close(w.c)
		return w.c, func() {}
	}
	f.waits[w] = struct{}{}
	return w.c, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.waits, w)
	}
}

// Advance moves the clock on by d and wakes every waiter now due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	for w := range f.waits {
		if !f.now.Before(w.at) {
			close(w.c)
			delete(f.waits, w)
		}
	}
}
