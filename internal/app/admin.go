package app

import (
	"bufio"
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

func releaseCommand(st *state) *cli.Command {
	return &cli.Command{
		Name:  "release",
		Usage: "break a lock: revoke its holder, whose lockrun then stops its command",
		UsageText: "lockrun release [flags] KEY\n\n" +
			"   The holder's next renewal fails: its lockrun stops the command (SIGTERM, then SIGKILL)\n" +
			"   and exits 76. The fencing token is never lowered, so the next holder's is higher.\n" +
			"   On a terminal it shows the holder and asks first, unless --yes.\n\n" +
			"   Exit status: 0 the lock was broken, 1 it was free (nothing to do), 2 not released\n" +
			"   (declined, or the lock changed hands while you were asked).",
		OnUsageError: onUsageError,
		Flags: append(commonFlags("print errors only", adminVerbose),
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "do not ask, even on a terminal"}),
		Action: st.release,
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
	b, err := openBackend(c.Context, c.String("backend"))
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
// one line per thing known about its holder.
func describe(s backend.Status, now time.Time) string {
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

func (st *state) release(c *cli.Context) error {
	return st.withKey(c, func(b backend.Backend, key string) error {
		s, err := b.Inspect(c.Context, key)
		if err != nil {
			return err
		}
		if !s.Held {
			st.say("%s: free, nothing to release (last token %s)\n", key, s.Token)
			return answerFree
		}
		if !c.Bool("yes") && isTerminal(st.stdin) && isTerminal(st.stderr) {
			if s, err = st.confirm(c, b, s); err != nil {
				return err
			}
		}
		if err := b.ForceRelease(c.Context, key); err != nil {
			return err
		}
		st.say("%s: released the lock of %s (run %s); a lockrun still running it stops the command and exits 76\n",
			key, heldBy(s, time.Now()), backend.Escape(s.RunID))
		return nil
	})
}

// confirm asks on the terminal before breaking s's lock, then looks again:
// a lock that changed hands while the question was open is not broken.
func (st *state) confirm(c *cli.Context, b backend.Backend, s backend.Status) (backend.Status, error) {
	fmt.Fprint(st.stderr, describe(s, time.Now()))
	fmt.Fprintf(st.stderr, "Break this lock? Its command will be stopped. [y/N] ")
	answer, _ := bufio.NewReader(st.stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		fmt.Fprintln(st.stderr, "not released")
		return s, answerNotReleased
	}
	now, err := b.Inspect(c.Context, s.Key)
	if err != nil {
		return s, err
	}
	if !now.Held || now.Token != s.Token || now.RunID != s.RunID {
		fmt.Fprintf(st.stderr, "%s changed hands meanwhile; not released: look again\n", s.Key)
		return s, answerNotReleased
	}
	return now, nil
}

// say prints to stdout unless --quiet.
func (st *state) say(format string, a ...any) {
	if !st.quiet {
		fmt.Fprintf(st.stdout, format, a...)
	}
}
