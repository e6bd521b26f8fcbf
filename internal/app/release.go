package app

import (
	"bufio"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/lockrun/lockrun/backend"
)

func releaseCommand(st *state) *cli.Command {
	return &cli.Command{
		Name:  "release",
		Usage: "break a lock: revoke its holder, whose lockrun then stops its command",
		UsageText: "lockrun release [flags] KEY\n" +
			"   lockrun release [flags] --holder RUNID|TOKEN KEY   (one holder of a semaphore, or of a plain lock)\n" +
			"   lockrun release [flags] --all KEY                  (every holder)\n\n" +
			"   The holder's next renewal fails: its lockrun stops the command (SIGTERM, then SIGKILL)\n" +
			"   and exits 76. The fencing token is never lowered, so the next holder's is higher.\n" +
			"   The lock is free at once: a waiter may start while the broken command still runs\n" +
			"   (until its lockrun's next renewal and kill grace; a TTL if that lockrun is frozen).\n" +
			"   --revoke keeps it taken instead until that command has stopped and its lockrun let go,\n" +
			"   or its lease ends: no waiter starts beside a live broken command.\n" +
			"   A semaphore (run --limit N) with several holders needs --holder or --all.\n" +
			"   On a terminal it shows what it will break and asks first, unless --yes.\n\n" +
			"   Exit status: 0 the lock was broken, 1 it was free, or no holder is --holder (nothing to\n" +
			"   do), 2 not released (declined, or the lock changed hands while you were asked),\n" +
			"   64 several holders and neither --holder nor --all.",
		OnUsageError: onUsageError,
		Flags: append(commonFlags("print errors only", adminVerbose),
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "do not ask, even on a terminal"},
			&cli.StringFlag{Name: "holder", Usage: "break only the holder with this run id or fencing token (see status)"},
			&cli.BoolFlag{Name: "all", Usage: "break every holder of the key"},
			&cli.BoolFlag{Name: "revoke", Usage: "keep the lock taken until the broken command has stopped, not free it at once"}),
		Action: st.release,
	}
}

// breaking is what a release will break: some holders of a key, all of
// them (ForceRelease) or one (ReleaseHolder, by token).
type breaking struct {
	key     string
	holders []backend.Status
	all     bool
	revoke  bool // --revoke: keep the lock until the broken commands stopped (backend.Revoker)
}

func (st *state) release(c *cli.Context) error {
	if c.Bool("all") && c.IsSet("holder") {
		return usagef("--holder and --all exclude each other: break one holder or every holder")
	}
	return st.withKey(c, func(b backend.Backend, key string) error {
		s, err := b.Inspect(c.Context, key)
		if err != nil {
			return err
		}
		if !s.Held {
			st.say("%s: free, nothing to release (last token %s)\n", key, s.Token)
			return answerFree
		}
		br, err := st.choose(c, s)
		if err != nil {
			return err
		}
		_, canRevoke := b.(backend.Revoker)
		br.revoke = canRevoke && c.Bool("revoke")
		if !c.Bool("yes") && isTerminal(st.stdin) && isTerminal(st.stderr) {
			if br, err = st.confirm(c, b, br); err != nil {
				return err
			}
		}
		if err := br.do(c, b); err != nil {
			return err
		}
		now := time.Now()
		for _, h := range br.holders {
			if br.revoke {
				st.say("%s: revoked the lock of %s (run %s): its lockrun stops the command and exits 76; "+
					"the lock is free once it has, or when the lease ends (%s left)\n",
					key, heldBy(h, now), backend.Escape(h.RunID), h.TTL.Round(time.Millisecond))
				continue
			}
			st.say("%s: released the lock of %s (run %s); a lockrun still running it stops the command and exits 76\n",
				key, heldBy(h, now), backend.Escape(h.RunID))
		}
		return nil
	})
}

// choose picks the holders of s that the flags name: --all every one,
// --holder the one with that run id or token; without either, the one
// holder there is, or a usage error naming them when there are several.
func (st *state) choose(c *cli.Context, s backend.Status) (breaking, error) {
	all := s.All()
	switch {
	case c.Bool("all"):
		return breaking{key: s.Key, holders: all, all: true}, nil
	case c.IsSet("holder"):
		want := c.String("holder")
		i := slices.IndexFunc(all, func(h backend.Status) bool { return h.RunID == want || h.Token.String() == want })
		if i < 0 {
			st.say("%s: no holder has run id or token %q, nothing to release (held by %s)\n", s.Key, backend.Escape(want), holderList(all))
			return breaking{}, answerFree
		}
		return breaking{key: s.Key, holders: all[i : i+1]}, nil
	case len(all) > 1:
		return breaking{}, usagef("%s has %d holders (--limit %d): name one with --holder RUNID|TOKEN, or break them all with --all; held by %s",
			s.Key, len(all), s.Limit, holderList(all))
	}
	// One holder: a plain lock is broken whoever holds it by now, as
	// ever; a semaphore's one holder by its token, leaving any newcomer.
	return breaking{key: s.Key, holders: all, all: s.Limit <= 1}, nil
}

// holderList names holders on one line, holder (token, run), the first
// namedHolders of them, and counts the rest.
func holderList(holders []backend.Status) string {
	shown := holders[:min(len(holders), namedHolders)]
	names := make([]string, len(shown))
	for i, h := range shown {
		names[i] = fmt.Sprintf("%s (token %s, run %s)", dash(backend.Escape(h.Holder)), h.Token, backend.Escape(h.RunID))
	}
	return strings.Join(names, ", ") + more(holders, ", ")
}

// do breaks br's holders, atomically on the server: at once with
// ForceRelease for every one or ReleaseHolder for one by its token, or
// (--revoke) with Revoke, which keeps each lock until its command stopped.
func (br breaking) do(c *cli.Context, b backend.Backend) error {
	var err error
	switch r, ok := b.(backend.Revoker); {
	case br.revoke && ok && br.all:
		return r.Revoke(c.Context, br.key, 0)
	case br.revoke && ok:
		err = r.Revoke(c.Context, br.key, br.holders[0].Token)
	case br.all:
		return b.ForceRelease(c.Context, br.key)
	default:
		r, ok := b.(backend.HolderReleaser)
		if !ok {
			return fmt.Errorf("%w: this backend cannot break one holder of %q; use --all", backend.ErrConfig, br.key)
		}
		err = r.ReleaseHolder(c.Context, br.key, br.holders[0].Token)
	}
	if errors.Is(err, backend.ErrLost) {
		fmt.Fprintf(c.App.ErrWriter, "lockrun: %s: token %s is no longer held; not released: look again\n", br.key, br.holders[0].Token)
		return answerNotReleased
	}
	return err
}

// confirm asks on the terminal before breaking br, then looks again: a
// lock that changed hands while the question was open is not broken, nor
// is a semaphore that gained a holder the question did not show.
func (st *state) confirm(c *cli.Context, b backend.Backend, br breaking) (breaking, error) {
	now := time.Now()
	for _, h := range br.holders {
		fmt.Fprint(st.stderr, describe(h, now))
	}
	question := "Break this lock? Its command will be stopped."
	if len(br.holders) > 1 {
		question = fmt.Sprintf("Break all %d holders? Their commands will be stopped.", len(br.holders))
	}
	fmt.Fprintf(st.stderr, "%s [y/N] ", question)
	answer, _ := bufio.NewReader(st.stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
		fmt.Fprintln(st.stderr, "not released")
		return br, answerNotReleased
	}
	again, err := b.Inspect(c.Context, br.key)
	if err != nil {
		return br, err
	}
	if !sameHolders(br, again.All()) {
		fmt.Fprintf(st.stderr, "%s changed hands meanwhile; not released: look again\n", br.key)
		return br, answerNotReleased
	}
	return br, nil
}

// sameHolders reports whether br's holders all still hold, and, when br
// breaks every holder, whether they are all there are.
func sameHolders(br breaking, now []backend.Status) bool {
	if br.all && len(now) != len(br.holders) {
		return false
	}
	for _, h := range br.holders {
		if !slices.ContainsFunc(now, func(n backend.Status) bool { return n.Token == h.Token && n.RunID == h.RunID }) {
			return false
		}
	}
	return true
}
