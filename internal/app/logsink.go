package app

import (
	"fmt"
	"io"
	"log/slog"
	"log/syslog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Where lockrun's own lines go (--log): stderr; the local syslog daemon
// (journald's /dev/log too when it runs) or a syslog socket at a path;
// journald's native socket, or one at a path.
const (
	logStderr   = "stderr"
	logSyslog   = "syslog"
	logJournald = "journald"
	// journalSocket is where systemd-journald takes native records.
	journalSocket = "/run/systemd/journal/socket"
)

// openLog returns the writer for --log dest, and a close that flushes it.
// A log that cannot be reached falls back to stderr with a warning there:
// a job must not stop running because its log went away.
func openLog(dest string, stderr io.Writer) (io.Writer, func(), error) {
	name, path, _ := strings.Cut(dest, ":")
	var send func(slog.Level, string)
	var closeSend func() error
	var err error
	switch {
	case dest == "" || dest == logStderr:
		return stderr, func() {}, nil
	case name == logSyslog:
		send, closeSend, err = dialSyslog(path)
	case name == logJournald:
		if path == "" {
			path = journalSocket
		}
		send, closeSend, err = dialJournal(path)
	default:
		return nil, nil, usagef("--log %q: use stderr, syslog, syslog:/path/to/socket, journald or journald:/path/to/socket", dest)
	}
	if err != nil {
		fmt.Fprintf(stderr, "lockrun: warning: --log %s: %v; logging to stderr\n", name, err)
		return stderr, func() {}, nil
	}
	s := newQueuedSink(send, closeSend)
	return s, s.close, nil
}

// dialSyslog connects to the syslog socket at path, or the local one.
func dialSyslog(path string) (func(slog.Level, string), func() error, error) {
	network := ""
	if path != "" {
		network = "unixgram"
	}
	w, err := syslog.Dial(network, path, syslog.LOG_USER|syslog.LOG_NOTICE, "lockrun")
	if err != nil && path != "" {
		w, err = syslog.Dial("unix", path, syslog.LOG_USER|syslog.LOG_NOTICE, "lockrun")
	}
	if err != nil {
		if path == "" {
			path = "the local syslog (/dev/log)"
		}
		return nil, nil, fmt.Errorf("cannot reach %s: %w", path, err)
	}
	send := func(level slog.Level, line string) {
		switch {
		case level >= slog.LevelError:
			_ = w.Err(line)
		case level >= slog.LevelWarn:
			_ = w.Warning(line)
		case level >= levelNotice:
			_ = w.Notice(line)
		case level >= slog.LevelInfo:
			_ = w.Info(line)
		default:
			_ = w.Debug(line)
		}
	}
	return send, w.Close, nil
}

// sinkQueue is how many lines may wait for a slow log before lines are
// dropped: lockrun never waits for a log write (a stuck syslog must not
// hold up a renewal or a kill).
const sinkQueue = 256

// queuedSink hands lines to send from a goroutine of its own.
type queuedSink struct {
	send      func(slog.Level, string)
	closeSend func() error
	lines     chan sinkLine
	done      chan struct{}
	dropped   atomic.Int64

	mu     sync.Mutex // closed and sending on lines: no line after close
	closed bool
}

type sinkLine struct {
	level slog.Level
	text  string
}

func newQueuedSink(send func(slog.Level, string), closeSend func() error) *queuedSink {
	s := &queuedSink{send: send, closeSend: closeSend, lines: make(chan sinkLine, sinkQueue), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for l := range s.lines {
			s.send(l.level, l.text)
		}
	}()
	return s
}

// WriteLevel queues line under level, or drops it when the queue is full.
func (s *queuedSink) WriteLevel(level slog.Level, line string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	select {
	case s.lines <- sinkLine{level, line}:
	default:
		s.dropped.Add(1)
	}
	return nil
}

// Write queues p (a JSON record) at notice level.
func (s *queuedSink) Write(p []byte) (int, error) {
	_ = s.WriteLevel(levelNotice, strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// close sends what is queued, for a second at most, and says how many
// lines were dropped.
func (s *queuedSink) close() {
	if n := s.dropped.Load(); n > 0 {
		_ = s.WriteLevel(slog.LevelWarn, fmt.Sprintf("%d log lines dropped: the log was too slow", n))
	}
	s.mu.Lock()
	s.closed = true
	close(s.lines)
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-time.After(time.Second):
	}
	_ = s.closeSend()
}
