package postgres

import (
	"context"
	"crypto/sha256"
	_ "embed" // the SQL lives in sql/*.sql
	"encoding/binary"
	"strings"

	"github.com/jackc/pgx/v5"
)

// FenceSQLState is the SQLSTATE that lockrun_fence raises when the token
// it is given is lower than the highest it has recorded for the resource:
// the writer lost its lock and a newer holder has written since.
const FenceSQLState = "LRF01"

// FenceFunction and FenceTable are the names, in the lease table's schema,
// of the function that `lockrun init` installs and the table in which it
// keeps the highest token seen per resource.
const (
	FenceFunction = "lockrun_fence"
	FenceTable    = "lockrun_fences"
)

//go:embed sql/fence.sql
var fenceSQL string

// Fence is the quoted, schema-qualified name of lockrun_fence, as a user
// calls it.
func (b *Backend) Fence() string {
	return pgx.Identifier{b.table[0], FenceFunction}.Sanitize()
}

// installFence creates the fence table and (re)creates lockrun_fence in
// the lease table's schema, with the checkpoint table beside them. An advisory lock taken for the transaction
// serializes concurrent inits of one schema: two CREATE OR REPLACE
// FUNCTION at once can fail with "tuple concurrently updated".
func (b *Backend) installFence(ctx context.Context, c *pgx.Conn) error {
	schema := pgx.Identifier{b.table[0]}.Sanitize()
	sum := sha256.Sum256([]byte("fence\x00" + schema))
	return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(binary.BigEndian.Uint64(sum[:8]))); err != nil {
			return err
		}
		// No parameters: the simple protocol runs both statements.
		if _, err := tx.Exec(ctx, strings.ReplaceAll(fenceSQL, "{{schema}}", schema), pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, b.checkpointSQL(checkpointCreateSQL))
		return err
	})
}
