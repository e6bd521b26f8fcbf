package app

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockrun/lockrun/backend"
)

func statusCommand(st *state) *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show who holds a lock, since when, and what it runs",
		UsageText: "lockrun status [flags] KEY\n\n" +
			"   Exit status: 0 the lock is held, 1 it is free; anything else is an error\n" +
			"   (69 unreachable, 77 permission refused, 78 configuration). So a script can ask\n" +
			"   'lockrun status -q KEY' without reading its output.",
		OnUsageError: onUsageError,
		Flags: append(commonFlags("print nothing: answer with the exit status only", adminVerbose),
			&cli.BoolFlag{Name: "json", Usage: "print the status as one JSON object"}),
		Action: st.status,
	}
}

// oneKey is the single KEY argument of status and release.
func oneKey(c *cli.Context) (string, error) {
	if c.Args().Len() != 1 {
		return "", usagef("want exactly one KEY, got %d arguments", c.Args().Len())
	}
	key := c.Args().First()
	if err := backend.ValidateKey(key); err != nil {
		return "", usageError{err}
	}
	return key, nil
}

// withKey runs an admin command's action on its KEY argument and an open
// backend.
func (st *state) withKey(c *cli.Context, action func(b backend.Backend, key string) error) error {
	if _, err := st.logFrom(c); err != nil {
		return err
	}
	key, err := oneKey(c)
	if err != nil {
		return err
	}
	b, err := st.openBackend(c.Context, c.String("backend"))
	if err != nil {
		return err
	}
	defer b.Close()
	return action(b, key)
}

func (st *state) status(c *cli.Context) error {
	return st.withKey(c, func(b backend.Backend, key string) error {
		s, err := b.Inspect(c.Context, key)
		if err != nil {
			return err
		}
		switch {
		case st.quiet:
		case c.Bool("json"):
			err = writeJSON(st.stdout, statusJSON(s))
		default:
			_, err = fmt.Fprint(st.stdout, describe(s, time.Now()))
		}
		if err == nil && !s.Held {
			return answerFree
		}
		return err
	})
}

// describe is a lock's status for people: one line, and for a held lock
// one line per thing known about its holder; a semaphore says how many of
// its slots are taken, then describes each holder so.
func describe(s backend.Status, now time.Time) string {
	if s.Limit > 1 && len(s.Holders) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %d of %d held\n", s.Key, len(s.Holders), s.Limit)
		for _, h := range s.Holders {
			b.WriteString(describe(h, now))
		}
		return b.String()
	}
	if !s.Held {
		if s.Token == 0 {
			return fmt.Sprintf("%s: free (never taken)\n", s.Key)
		}
		return fmt.Sprintf("%s: free (last token %s)\n", s.Key, s.Token)
	}
	if s.RunID == "" { // not a lockrun: no token, no run
		return fmt.Sprintf("%s: held by %s\n", s.Key, backend.Escape(s.Holder))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: held by %s (token %s, run %s", s.Key, backend.Escape(s.Holder), s.Token, backend.Escape(s.RunID))
	if s.TTL > 0 {
		b.WriteString(", " + s.TTL.Round(time.Millisecond).String() + " left")
	}
	b.WriteString(")\n")
	detail := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "  %-9s %s\n", name+":", value)
		}
	}
	if s.Revoked {
		detail("revoked", "its lockrun is stopping the command; the lock is free once it has, or when the lease ends")
	}
	if !s.Since.IsZero() {
		detail("since", clock(s.Since, now)+" (held for "+age(s.Since, now)+")")
	}
	if !s.Renewed.IsZero() {
		detail("renewed", clock(s.Renewed, now)+" ("+age(s.Renewed, now)+" ago)")
	}
	detail("user", backend.Escape(s.Info.User))
	detail("command", backend.Escape(s.Info.Command))
	detail("ci job", backend.Escape(s.Info.CIURL))
	return b.String()
}

// say prints to stdout unless --quiet.
func (st *state) say(format string, a ...any) {
	if !st.quiet {
		fmt.Fprintf(st.stdout, format, a...)
	}
}
