package app

import (
	"fmt"
	"io"
	"time"

	"github.com/lockrun/lockrun/internal/logwriter"
)

// flushWait bounds how long lockrun, at its exit, waits for its last log
// lines to reach a stderr nobody reads.
const flushWait = 500 * time.Millisecond

// newLogWriter puts lockrun's own lines to w through a writer that never
// blocks (see package logwriter), with the count of dropped lines in the
// log's format.
func newLogWriter(w io.Writer, format string) *logwriter.Writer {
	notice := func(n int) []byte {
		return fmt.Appendf(nil, "lockrun: warning: %d log lines dropped: stderr was not being read\n", n)
	}
	if format == "json" {
		notice = func(n int) []byte {
			return fmt.Appendf(nil, `{"time":%q,"level":"WARN","msg":"log lines dropped: stderr was not being read","dropped":%d}`+"\n",
				time.Now().Format(time.RFC3339Nano), n)
		}
	}
	return logwriter.New(w, notice)
}
