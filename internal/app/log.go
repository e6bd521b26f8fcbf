package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// levelNotice is for what a person running lockrun should see without
// asking for it, such as a wait beginning: above info, below warnings.
const levelNotice = slog.LevelInfo + 2

// newLogger logs to w (stderr, never the command's stdout, or a syslog
// sink) in format "text" or "json", at notice level by default, error
// level when quiet and debug level when verbose.
func newLogger(w io.Writer, format string, quiet, verbose bool) (*slog.Logger, error) {
	level := levelNotice
	switch {
	case quiet && verbose:
		return nil, usagef("--quiet and --verbose contradict each other: pick one")
	case quiet:
		level = slog.LevelError
	case verbose:
		level = slog.LevelDebug
	}
	switch format {
	case "text", "":
		return slog.New(&lineHandler{w: w, level: level, mu: &sync.Mutex{}}), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: jsonAttr})), nil
	}
	return nil, usagef("--log-format %q: use text or json", format)
}

// jsonAttr gives durations in seconds, as a number (the JSON handler's
// default is nanoseconds), and names the notice level.
func jsonAttr(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value.Resolve(); {
	case v.Kind() == slog.KindDuration:
		return slog.Float64(a.Key, v.Duration().Seconds())
	case a.Key == slog.LevelKey && v.Any() == levelNotice:
		return slog.String(a.Key, "NOTICE")
	}
	return a
}

// leveled is a sink that files each line under its level: syslog.
type leveled interface {
	WriteLevel(level slog.Level, line string) error
}

// lineHandler writes one line per record for people reading a terminal or
// a cron mail: "lockrun: warning: message key=value ...". To a leveled
// sink it gives the line without "lockrun: ", which the sink's tag says.
type lineHandler struct {
	w     io.Writer
	level slog.Level
	attrs []slog.Attr
	mu    *sync.Mutex
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	sink, isLeveled := h.w.(leveled)
	if !isLeveled {
		b.WriteString("lockrun: ")
	}
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("warning: ")
	}
	b.WriteString(r.Message)
	write := func(a slog.Attr) bool {
		v := a.Value.Resolve()
		if v.Kind() == slog.KindDuration {
			v = slog.StringValue(v.Duration().Round(time.Millisecond).String())
		}
		s := v.String()
		if strings.ContainsAny(s, " \t\r\n\"=") || s == "" {
			s = fmt.Sprintf("%q", s)
		}
		fmt.Fprintf(&b, " %s=%s", a.Key, s)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	if isLeveled {
		return sink.WriteLevel(r.Level, b.String())
	}
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	return &c
}

// WithGroup is not used by lockrun; groups are flattened.
func (h *lineHandler) WithGroup(string) slog.Handler { return h }
