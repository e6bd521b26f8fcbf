package app

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockrun/lockrun/backend"
)

func statusCommand(st *state) *cli.Command {
	return &cli.Command{
		Name:         "status",
		Usage:        "show who holds a lock",
		UsageText:    "lockrun status [flags] KEY",
		OnUsageError: onUsageError,
		Flags:        append(commonFlags(), &cli.BoolFlag{Name: "json", Usage: "print the status as one JSON object"}),
		Action:       st.status,
	}
}

func releaseCommand(st *state) *cli.Command {
	return &cli.Command{
		Name:  "release",
		Usage: "break a lock: revoke its holder, whose lockrun then stops its command",
		UsageText: "lockrun release [flags] KEY\n\n" +
			"   The holder's next renewal fails: its lockrun stops the command (SIGTERM, then SIGKILL)\n" +
			"   and exits 76. The fencing token is never lowered, so the next holder's is higher.",
		OnUsageError: onUsageError,
		Flags:        commonFlags(),
		Action:       st.release,
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
	if _, err := st.logTo(st.stderr, c.String("log-format"), c.Bool("quiet"), false); err != nil {
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
		if c.Bool("json") {
			return json.NewEncoder(st.stdout).Encode(map[string]any{
				"key": s.Key, "held": s.Held, "holder": s.Holder, "run_id": s.RunID,
				"token": uint64(s.Token), "ttl_ms": s.TTL.Milliseconds(),
			})
		}
		_, err = fmt.Fprintln(st.stdout, describe(s))
		return err
	})
}

// describe is one line about a lock, for people.
func describe(s backend.Status) string {
	if !s.Held {
		if s.Token == 0 {
			return fmt.Sprintf("%s: free (never taken)", s.Key)
		}
		return fmt.Sprintf("%s: free (last token %s)", s.Key, s.Token)
	}
	if s.RunID == "" { // not a lockrun: no token, no run
		return fmt.Sprintf("%s: held by %s", s.Key, backend.Escape(s.Holder))
	}
	line := fmt.Sprintf("%s: held by %s (token %s, run %s", s.Key, backend.Escape(s.Holder), s.Token, backend.Escape(s.RunID))
	if s.TTL > 0 {
		line += ", " + s.TTL.Round(time.Millisecond).String() + " left"
	}
	return line + ")"
}

func (st *state) release(c *cli.Context) error {
	return st.withKey(c, func(b backend.Backend, key string) error {
		return b.ForceRelease(c.Context, key)
	})
}
