package app

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"net"
	"os"
	"strconv"
)

// dialJournal opens journald's native socket at path: each line becomes
// one record with MESSAGE, PRIORITY (syslog's numbers) and
// SYSLOG_IDENTIFIER=lockrun, so `journalctl -t lockrun -p warning` finds
// lockrun's warnings.
func dialJournal(path string) (func(slog.Level, string), func() error, error) {
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, nil, err
	}
	pid := strconv.Itoa(os.Getpid())
	send := func(level slog.Level, line string) {
		var b bytes.Buffer
		field(&b, "MESSAGE", line)
		field(&b, "PRIORITY", strconv.Itoa(priority(level)))
		field(&b, "SYSLOG_IDENTIFIER", "lockrun")
		field(&b, "SYSLOG_PID", pid)
		_, _ = conn.Write(b.Bytes())
	}
	return send, conn.Close, nil
}

// field appends one field in journald's native format: NAME=value, or,
// for a value with a newline, NAME, a newline, its length as 64-bit
// little-endian, the value.
func field(b *bytes.Buffer, name, value string) {
	if !bytes.ContainsRune([]byte(value), '\n') {
		b.WriteString(name + "=" + value + "\n")
		return
	}
	b.WriteString(name + "\n")
	_ = binary.Write(b, binary.LittleEndian, uint64(len(value)))
	b.WriteString(value + "\n")
}

// priority is level as a syslog priority: err 3, warning 4, notice 5,
// info 6, debug 7.
func priority(level slog.Level) int {
	switch {
	case level >= slog.LevelError:
		return 3
	case level >= slog.LevelWarn:
		return 4
	case level >= levelNotice:
		return 5
	case level >= slog.LevelInfo:
		return 6
	}
	return 7
}
