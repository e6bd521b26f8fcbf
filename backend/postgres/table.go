package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// SQLSTATEs the backend tells apart.
const (
	codeUniqueViolation = "23505"
	codeDuplicateTable  = "42P07"
	codeDuplicateObject = "42710"
	codeUndefinedTable  = "42P01"
	codeUndefinedColumn = "42703"
	// Refusals and missing objects, which retrying does not cure.
	codeInsufficientPrivilege = "42501"
	codeInvalidCatalogName    = "3D000" // no such database
	codeInvalidSchemaName     = "3F000"
	codeDatatypeMismatch      = "42804" // a lease table of another shape
	codeUndefinedFunction     = "42883"
	codeClassResources        = "53" // insufficient resources: out of memory, too many connections
	// lock_timeout ran out while waiting in line.
	codeLockNotAvailable = "55P03"
	// A statement_timeout (the server's or the role's), or a cancel.
	codeQueryCanceled = "57014"
)

// retryMissingTable runs f, and when the lease table does not exist yet
// and creating it is allowed, creates it and runs f once more. Probing
// with the real statement keeps DDL off the hot path: the table is looked
// for only when it is missing.
// A table of an older lockrun, without a column the statement needs, is
// upgraded the same way (see sql/upgrade.sql).
func (b *Backend) retryMissingTable(ctx context.Context, c *pgx.Conn, f func() error) error {
	err := f()
	if !isMissingTable(err) && pgCode(err) != codeUndefinedColumn || !b.create {
		return err
	}
	if err := b.createTable(ctx, c); err != nil {
		return err
	}
	return f()
}

// createTable runs CREATE TABLE IF NOT EXISTS, then adds the columns an
// older lockrun's table lacks. Two sessions that create it at once can
// both find the table missing; the loser then fails once the winner
// commits, on a unique index of the catalog (pg_type or pg_class) or on
// the table's row type, so that failure means the table now exists.
func (b *Backend) createTable(ctx context.Context, c *pgx.Conn) error {
	_, err := c.Exec(ctx, b.sql.create)
	switch pgCode(err) {
	case codeUniqueViolation, codeDuplicateTable, codeDuplicateObject, "":
	default:
		return err
	}
	_, err = c.Exec(ctx, b.sql.upgrade)
	return err
}

func isMissingTable(err error) bool { return pgCode(err) == codeUndefinedTable }

// pgCode is the SQLSTATE of a server error, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
