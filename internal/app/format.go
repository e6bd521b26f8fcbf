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
		shown := st.Holders[:min(len(st.Holders), namedHolders)]
		each := make([]string, len(shown))
		for i, h := range shown {
			each[i] = heldBy(h, now)
		}
		return fmt.Sprintf("%d of %d holders: %s%s", len(st.Holders), st.Limit, strings.Join(each, "; "), more(st.Holders, "; "))
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

// namedHolders is how many of a semaphore's holders a one-line message
// names; the rest are counted (status lists them all), so that a limit
// in the hundreds does not make each line tens of kilobytes.
const namedHolders = 5

// more counts the holders past namedHolders ("; and 995 more"), or is
// empty when every one is named.
func more(holders []backend.Status, sep string) string {
	if n := len(holders) - namedHolders; n > 0 {
		return fmt.Sprintf("%sand %d more", sep, n)
	}
	return ""
}

// isTerminal tells whether f is a terminal.
func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
