package postgres

import (
	"crypto/sha256"
	_ "embed" // the SQL lives in sql/*.sql
	"encoding/binary"
	"encoding/hex"
	"strings"

	"github.com/jackc/pgx/v5"
)

var (
	//go:embed sql/create.sql
	createSQL string
	//go:embed sql/acquire.sql
	acquireSQL string
	//go:embed sql/take.sql
	takeSQL string
	//go:embed sql/renew.sql
	renewSQL string
	//go:embed sql/release.sql
	releaseSQL string
	//go:embed sql/force_release.sql
	forceReleaseSQL string
	//go:embed sql/inspect.sql
	inspectSQL string
	//go:embed sql/queue.sql
	queueSQL string
	//go:embed sql/keep.sql
	keepSQL string
	//go:embed sql/upgrade.sql
	upgradeSQL string
	//go:embed sql/list.sql
	listSQL string
	//go:embed sql/sem_acquire.sql
	semAcquireSQL string
	//go:embed sql/sem_renew.sql
	semRenewSQL string
	//go:embed sql/sem_release.sql
	semReleaseSQL string
	//go:embed sql/release_holder.sql
	releaseHolderSQL string
	//go:embed sql/revoke.sql
	revokeSQL string
)

// statements are the backend's SQL with the lease table's quoted name
// filled in. Identifiers cannot be bound as parameters, so the name is
// spliced, always through pgx.Identifier's quoting, and only the name.
type statements struct {
	create, acquire, take, renew, release, forceRelease, inspect string
	upgrade, list                                                string
	// A semaphore's statements; see sql/sem_acquire.sql.
	semAcquire, semRenew, semRelease, releaseHolder string
	revoke                                          string // see sql/revoke.sql
	// The releases without their question whether someone waits, for a
	// server that refuses it (see lease.release).
	releaseBare, semReleaseBare string
}

// queuedHint is the release statements' question whether someone is in
// the key's waiting line, and bareHint its stand-in, always false.
const (
	queuedHint = "NOT pg_try_advisory_xact_lock($6::bigint)"
	bareHint   = "($6::bigint IS NULL)"
)

func newStatements(table pgx.Identifier) statements {
	quoted := table.Sanitize()
	fill := func(sql string) string { return strings.ReplaceAll(sql, "{{table}}", quoted) }
	return statements{
		create:         fill(createSQL),
		acquire:        fill(acquireSQL),
		take:           fill(takeSQL),
		renew:          fill(renewSQL),
		release:        fill(releaseSQL),
		forceRelease:   fill(forceReleaseSQL),
		inspect:        fill(inspectSQL),
		upgrade:        fill(upgradeSQL),
		list:           fill(listSQL),
		semAcquire:     fill(semAcquireSQL),
		semRenew:       fill(semRenewSQL),
		semRelease:     fill(semReleaseSQL),
		releaseHolder:  fill(releaseHolderSQL),
		revoke:         fill(revokeSQL),
		releaseBare:    strings.Replace(fill(releaseSQL), queuedHint, bareHint, 1),
		semReleaseBare: strings.Replace(fill(semReleaseSQL), queuedHint, bareHint, 1),
	}
}

// channel is the LISTEN/NOTIFY channel of one key in one table. A channel
// per key wakes only that key's waiters. Channel names are identifiers of
// at most 63 bytes, so the table and key are hashed into one; a collision
// would cost a spurious wake-up, nothing more.
func channel(table pgx.Identifier, key string) string {
	sum := sha256.Sum256([]byte(table.Sanitize() + "\x00" + key))
	return "lockrun_" + hex.EncodeToString(sum[:16])
}

// queueID is the advisory lock that orders the waiters of one key in one
// table: the line, whose holder is next in line (see awaitFront). It
// shares the server's advisory lock space with applications; a 64-bit
// hash makes a clash with their ids unlikely, and a clash would only
// delay waiting, never grant a lease.
func queueID(table pgx.Identifier, key string) int64 { return lockID("queue", table, key) }

// frontID is the advisory lock of the waiter at the head of key's line,
// the one that listens and tries (see front).
func frontID(table pgx.Identifier, key string) int64 { return lockID("front", table, key) }

// lockID is a 64-bit advisory lock id for one of key's locks, named role.
func lockID(role string, table pgx.Identifier, key string) int64 {
	sum := sha256.Sum256([]byte(role + "\x00" + table.Sanitize() + "\x00" + key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}
