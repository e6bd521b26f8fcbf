package main

import "strings"

// environment lists the variables that set lockrun's flags (from the
// definition), then those lockrun gives the command.
func environment(p program) string {
	var sb strings.Builder
	sb.WriteString(".SH ENVIRONMENT\nEvery flag can be set by its variable; a flag on the command line wins.\n")
	seen := map[string]bool{}
	for _, c := range p.Commands {
		for _, o := range c.Flags {
			for _, e := range o.Env {
				if seen[e] {
					continue
				}
				seen[e] = true
				sb.WriteString(".TP\n" + bold(e) + "\nthe same as " + bold(o.spellings()[0]) + "\n")
			}
		}
	}
	sb.WriteString(commandEnvironment)
	return sb.String()
}

// The runner's side (internal/runner), which the CLI definition does not
// describe: what the command gets, files, and where to read more.
const commandEnvironment = `.PP
The command gets these, and every other LOCKRUN_* variable of lockrun's
environment is removed from its environment:
.TP
.B LOCKRUN_FENCING_TOKEN
decimal; strictly greater than every token issued before for this key
.TP
.B LOCKRUN_KEY
the key
.TP
.B LOCKRUN_HOLDER
who lockrun says it is
.TP
.B LOCKRUN_RUN_ID
unique per run: an idempotency key
.TP
.B LOCKRUN_TTL
the lease length, e.g. 30s
.TP
.B LOCKRUN_BACKEND
the backend URL with any password removed
`

const staticSections = `.SH FILES
.TP
.I /run/lockrun
root's default lock directory for the file backend, 0700
.TP
.I /tmp/lockrun\-UID
every other user's default lock directory, 0700; locks shared between users
live in a directory an administrator shares with a group (see the file
backend's page)
.SH SEE ALSO
.BR flock (1),
.BR etcdctl (1),
.BR redis\-cli (1),
.BR psql (1)
.PP
The safety model, one page per backend, reliability and performance:
.UR https://github.com/lockrun/lockrun/tree/main/docs
.UE
`
