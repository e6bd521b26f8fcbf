package app

import (
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/backend"
)

// Text for people about locks. Everything a store returned goes through
// backend.Escape: a holder name or command line may carry terminal
// escapes.

// clock formats t for a person: the time of day when it is today, the
// date too otherwise, in local time.
func clock(t, now time.Time) string {
	t = t.Local()
	if y, m, d := t.Date(); y == now.Local().Year() && m == now.Local().Month() && d == now.Local().Day() {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}

// age is how long ago t was, to the second (to the millisecond under a
// second).
func age(t, now time.Time) string {
	d := now.Sub(t)
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// heldBy is "H since T, token N", as much as st knows; for a semaphore,
// "N of L holders: " and each holder so.
func heldBy(st backend.Status, now time.Time) string {
	if st.Limit > 1 && len(st.Holders) > 0 {
		each := make([]string, len(st.Holders))
		for i, h := range st.Holders {
			each[i] = heldBy(h, now)
		}
		return fmt.Sprintf("%d of %d holders: %s", len(st.Holders), st.Limit, strings.Join(each, "; "))
	}
	s := backend.Escape(st.Holder)
	if s == "" {
		s = "an unnamed holder"
	}
	if !st.Since.IsZero() {
		s += " since " + clock(st.Since, now) + " (" + age(st.Since, now) + ")"
	}
	if st.Token != 0 {
		s += ", token " + st.Token.String()
	}
	return s
}

// isTerminal tells whether f is a terminal.
func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
