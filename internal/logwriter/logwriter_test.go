package logwriter

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func notice(n int) []byte { return fmt.Appendf(nil, "dropped %d\n", n) }

// A pipe whose reader is alive but never reads: every Write still returns
// at once, the lines beyond the queue are dropped and counted, and the
// count is the first thing written once the reader drains.
func TestAStalledReaderCostsLinesNeverTime(t *testing.T) {
	r, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer pw.Close()
	// Fill the pipe so that the drain goroutine blocks on its first write.
	pw.Write(bytes.Repeat([]byte("x"), 1<<16))
	go pw.Write(bytes.Repeat([]byte("y"), 1<<16)) // holds the writer side too
	w := New(pw, notice)
	// Wait until the drain goroutine holds a first line and is blocked
	// writing it, so that what follows does not depend on when the
	// scheduler first runs it.
	w.Write([]byte("first\n"))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		w.mu.Lock()
		blocked := w.writing && len(w.queue) == 0
		w.mu.Unlock()
		if blocked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the drain goroutine never took the first line")
		}
	}
	begin := time.Now()
	for i := range 1000 {
		w.Write(fmt.Appendf(nil, "line %d\n", i))
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("1000 writes to a stalled pipe took %v", took)
	}
	if d := w.Dropped(); d != 1000-MaxQueued {
		t.Errorf("%d lines dropped of 1000 to a stalled pipe; want %d", d, 1000-MaxQueued)
	}
	if w.Flush(50 * time.Millisecond) {
		t.Error("Flush reported success while the pipe was stalled")
	}
}

type slow struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	entered chan struct{}
	ok      chan struct{}
}

func (s *slow) Write(p []byte) (int, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.ok
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func TestDroppedLinesAreCountedInTheNextLineThatGetsThrough(t *testing.T) {
	s := &slow{entered: make(chan struct{}, 1), ok: make(chan struct{})}
	w := New(s, notice)
	w.Write([]byte("line 0\n"))
	<-s.entered // the drain goroutine holds line 0, blocked
	for i := range MaxQueued + 9 {
		w.Write(fmt.Appendf(nil, "line %d\n", i+1))
	}
	close(s.ok) // the reader is back
	if !w.Flush(5 * time.Second) {
		t.Fatal("Flush timed out with a working writer")
	}
	w.Write([]byte("after\n"))
	if !w.Flush(5 * time.Second) {
		t.Fatal("Flush timed out with a working writer")
	}
	s.mu.Lock()
	out := s.buf.String()
	s.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := append([]string{}, lines[:MaxQueued+1]...) // line 0, then the queued
	want = append(want, "dropped 9", "after")
	if strings.Join(lines, "|") != strings.Join(want, "|") || lines[MaxQueued] != fmt.Sprintf("line %d", MaxQueued) {
		t.Errorf("output %q; want lines 0..%d, the count of the 9 dropped, then the next line", lines, MaxQueued)
	}
}
