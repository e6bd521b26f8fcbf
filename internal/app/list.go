package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockrun/lockrun/backend"
)

// lister is a backend that can list its held locks; every backend of
// lockrun's is one.
type lister interface {
	List(ctx context.Context, prefix string) ([]backend.Status, error)
}

func listCommand(st *state) *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the held locks, or those whose key starts with PREFIX",
		UsageText: "lockrun list [flags] [PREFIX]\n\n" +
			"   One line per holder: key, holder, token, since when, time left, user, and the key's\n" +
			"   slots taken of its limit (a semaphore's key is on one line per holder; 1/1 a plain lock).\n" +
			"   Exit status 0, also when nothing is held.",
		OnUsageError: onUsageError,
		Flags: append(commonFlags("print errors only", adminVerbose),
			&cli.BoolFlag{Name: "json", Usage: "print a JSON array of statuses, as status --json prints one"}),
		Action: st.list,
	}
}

func (st *state) list(c *cli.Context) error {
	if _, err := st.logFrom(c); err != nil {
		return err
	}
	if c.Args().Len() > 1 {
		return usagef("want at most one PREFIX, got %d arguments", c.Args().Len())
	}
	prefix := c.Args().First()
	if prefix != "" {
		if err := backend.ValidateKey(prefix); err != nil {
			return usageError{fmt.Errorf("PREFIX: %w", err)}
		}
	}
	b, err := st.openBackend(c.Context, c.String("backend"))
	if err != nil {
		return err
	}
	defer b.Close()
	l, ok := b.(lister)
	if !ok {
		return fmt.Errorf("%w: %s cannot list its locks", backend.ErrConfig, describeBackend(c.String("backend"), b))
	}
	held, err := l.List(c.Context, prefix)
	if err != nil || st.quiet {
		return err
	}
	if c.Bool("json") {
		all := make([]map[string]any, 0, len(held))
		for _, s := range held {
			all = append(all, statusJSON(s))
		}
		return writeJSON(st.stdout, all)
	}
	return table(st.stdout, held, time.Now())
}

// table writes held as aligned columns, with a header.
func table(w io.Writer, held []backend.Status, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tHOLDER\tTOKEN\tSINCE\tHELD FOR\tTTL LEFT\tUSER\tSLOTS")
	for _, key := range held {
		all := key.All()
		slots := fmt.Sprintf("%d/%d", len(all), max(key.Limit, 1))
		for _, s := range all {
			row(tw, s, slots, now)
		}
	}
	return tw.Flush()
}

// row writes one holder's line of the table.
func row(tw io.Writer, s backend.Status, slots string, now time.Time) {
	since, heldFor := "-", "-"
	if !s.Since.IsZero() {
		since, heldFor = clock(s.Since, now), age(s.Since, now)
	}
	ttl := "-"
	if s.TTL > 0 {
		ttl = s.TTL.Round(time.Second).String()
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Key, dash(backend.Escape(s.Holder)), s.Token, since, heldFor, ttl, dash(backend.Escape(s.Info.User)), slots)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// statusJSON is a status as status --json and list --json print it: text
// as stored (JSON escapes it), times in RFC 3339, durations in seconds.
// The top-level fields are the (first) holder's; "limit" is the key's (1
// for a plain lock, 0 when free) and "holders" lists every holder, oldest
// token first, so that a script reads a plain lock and a semaphore alike.
func statusJSON(s backend.Status) map[string]any {
	m := holderJSON(s)
	all := s.All()
	holders := make([]map[string]any, 0, len(all))
	for _, h := range all {
		holders = append(holders, holderJSON(h))
	}
	m["holders"], m["limit"] = holders, s.Limit
	if s.Held && s.Limit == 0 {
		m["limit"] = 1
	}
	return m
}

// holderJSON is one holder's fields of statusJSON.
func holderJSON(s backend.Status) map[string]any {
	m := map[string]any{
		"key": s.Key, "held": s.Held, "holder": s.Holder, "run_id": s.RunID,
		"token": uint64(s.Token), "ttl_ms": s.TTL.Milliseconds(), "ttl_s": s.TTL.Seconds(),
	}
	if !s.Since.IsZero() {
		m["since"] = s.Since.UTC().Format(time.RFC3339Nano)
	}
	if !s.Renewed.IsZero() {
		m["renewed"] = s.Renewed.UTC().Format(time.RFC3339Nano)
	}
	if s.Info != (backend.HolderInfo{}) {
		m["info"] = s.Info
	}
	if s.Revoked {
		m["revoked"] = true
	}
	return m
}

func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}
