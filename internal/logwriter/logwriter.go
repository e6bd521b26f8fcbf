// Package logwriter is an io.Writer for log lines that never blocks its
// caller: lockrun logs on the paths that signal, renew and release, and a
// stderr whose reader is alive but not reading must cost lines there,
// never time. Each Write is one line (slog handlers write one record per
// call); lines that find the queue full are dropped and counted, and the
// count goes out before the next line that gets through.
package logwriter

import (
	"io"
	"sync"
	"time"
)

// MaxQueued is how many lines may wait for a slow writer before new ones
// are dropped.
const MaxQueued = 64

// Writer queues lines for a goroutine that writes them to the underlying
// writer.
type Writer struct {
	out    io.Writer
	notice func(dropped int) []byte

	mu      sync.Mutex
	queue   [][]byte
	dropped int // lines dropped since the last one queued
	writing bool
	wake    chan struct{}
	idle    *sync.Cond // broadcast when the queue is empty and nothing is being written
}

// New returns a Writer to out. notice formats the line that reports how
// many lines were dropped, in the log's own format.
func New(out io.Writer, notice func(dropped int) []byte) *Writer {
	w := &Writer{out: out, notice: notice, wake: make(chan struct{}, 1)}
	w.idle = sync.NewCond(&w.mu)
	go w.drain()
	return w
}

// Write queues a copy of p, or drops it if MaxQueued lines are waiting. It
// never blocks on the underlying writer and always reports success: a
// log line is not worth failing a caller for.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	room := MaxQueued - len(w.queue)
	if w.dropped > 0 {
		room-- // the notice needs a place too
	}
	if room < 1 {
		w.dropped++
		return len(p), nil
	}
	if w.dropped > 0 {
		w.queue = append(w.queue, w.notice(w.dropped))
		w.dropped = 0
	}
	w.queue = append(w.queue, append([]byte(nil), p...))
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// Dropped is how many lines were dropped and not yet reported.
func (w *Writer) Dropped() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dropped
}

// Flush waits, at most timeout, until every queued line was written; it
// reports whether they were. A process calls it before it exits.
func (w *Writer) Flush(timeout time.Duration) bool {
	done := make(chan struct{})
	go func() {
		w.mu.Lock()
		for len(w.queue) > 0 || w.writing {
			w.idle.Wait()
		}
		w.mu.Unlock()
		close(done)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false // the waiter stays parked; the process is about to exit
	}
}

func (w *Writer) drain() {
	for range w.wake {
		w.mu.Lock()
		lines := w.queue
		w.queue, w.writing = nil, true
		w.mu.Unlock()
		for _, line := range lines {
			_, _ = w.out.Write(line) // nowhere to report a failure to
		}
		w.mu.Lock()
		w.writing = false
		if len(w.queue) == 0 {
			w.idle.Broadcast()
		}
		w.mu.Unlock()
	}
}
