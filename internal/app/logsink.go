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

// Where lockrun's own lines go (--log): stderr, the local syslog daemon
// (journald's /dev/log too when it runs), or a syslog socket at a path.
const (
	logStderr = "stderr"
	logSyslog = "syslog"
)

// openLog returns the writer for --log dest, and a close that flushes it.
// A syslog that cannot be reached falls back to stderr with a warning
// there: a job must not stop running because its log went away.
func openLog(dest string, stderr io.Writer) (io.Writer, func(), error) {
	var w io.Writer
	var closeLog func()
	var err error
	switch {
	case dest == "" || dest == logStderr:
		return stderr, func() {}, nil
	case dest == logSyslog:
		w, closeLog, err = dialSyslog("", "")
	case strings.HasPrefix(dest, logSyslog+":"):
		w, closeLog, err = dialSyslog("unixgram", strings.TrimPrefix(dest, logSyslog+":"))
	default:
		return nil, nil, usagef("--log %q: use stderr, syslog or syslog:/path/to/socket", dest)
	}
	if err != nil {
		fmt.Fprintf(stderr, "lockrun: warning: %v; logging to stderr\n", err)
		return stderr, func() {}, nil
	}
	return w, closeLog, nil
}

// syslogQueue is how many lines may wait for a slow syslog daemon before
// lines are dropped: lockrun never waits for a log write (a stuck syslog
// must not hold up a renewal or a kill).
const syslogQueue = 256

// syslogSink sends lines to syslog from a goroutine of its own.
type syslogSink struct {
	w       *syslog.Writer
	lines   chan syslogLine
	done    chan struct{}
	dropped atomic.Int64

	mu     sync.Mutex // closed and sending on lines: no line after close
	closed bool
}

type syslogLine struct {
	level slog.Level
	text  string
}

func dialSyslog(network, addr string) (io.Writer, func(), error) {
	w, err := syslog.Dial(network, addr, syslog.LOG_USER|syslog.LOG_NOTICE, "lockrun")
	if err != nil && network == "unixgram" {
		w, err = syslog.Dial("unix", addr, syslog.LOG_USER|syslog.LOG_NOTICE, "lockrun")
	}
	if err != nil {
		where := addr
		if where == "" {
			where = "the local syslog (/dev/log)"
		}
		return nil, nil, fmt.Errorf("--log syslog: cannot reach %s: %w", where, err)
	}
	s := &syslogSink{w: w, lines: make(chan syslogLine, syslogQueue), done: make(chan struct{})}
	go s.send()
	return s, s.close, nil
}

// WriteLevel queues line under level's priority, or drops it when the
// queue is full.
func (s *syslogSink) WriteLevel(level slog.Level, line string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	select {
	case s.lines <- syslogLine{level, line}:
	default:
		s.dropped.Add(1)
	}
	return nil
}

// Write queues p (a JSON record) at notice priority.
func (s *syslogSink) Write(p []byte) (int, error) {
	_ = s.WriteLevel(levelNotice, strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func (s *syslogSink) send() {
	defer close(s.done)
	for l := range s.lines {
		switch {
		case l.level >= slog.LevelError:
			_ = s.w.Err(l.text)
		case l.level >= slog.LevelWarn:
			_ = s.w.Warning(l.text)
		case l.level >= levelNotice:
			_ = s.w.Notice(l.text)
		case l.level >= slog.LevelInfo:
			_ = s.w.Info(l.text)
		default:
			_ = s.w.Debug(l.text)
		}
	}
}

// close sends what is queued, for a second at most, and says how many
// lines were dropped.
func (s *syslogSink) close() {
	if n := s.dropped.Load(); n > 0 {
		_ = s.WriteLevel(slog.LevelWarn, fmt.Sprintf("%d log lines dropped: syslog was too slow", n))
	}
	s.mu.Lock()
	s.closed = true
	close(s.lines)
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-time.After(time.Second):
	}
	_ = s.w.Close()
}
