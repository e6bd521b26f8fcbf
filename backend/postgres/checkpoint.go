package postgres

import (
	"context"
	_ "embed" // the SQL lives in sql/*.sql
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/lockrun/lockrun/backend"
)

var _ backend.Checkpointer = (*Backend)(nil)

var (
	//go:embed sql/checkpoint_create.sql
	checkpointCreateSQL string
	//go:embed sql/checkpoint_set.sql
	checkpointSetSQL string
)

// checkpointSQL fills in the lease table and its schema.
func (b *Backend) checkpointSQL(sql string) string {
	return strings.NewReplacer("{{table}}", b.Table(), "{{schema}}", pgx.Identifier{b.table[0]}.Sanitize()).Replace(sql)
}

func (b *Backend) checkpoints() string {
	return pgx.Identifier{b.table[0], "lockrun_checkpoints"}.Sanitize()
}

// createCheckpoints creates the checkpoint table if it is missing; a
// concurrent creator's win counts as done, as in createTable.
func (b *Backend) createCheckpoints(ctx context.Context, c *pgx.Conn) error {
	_, err := c.Exec(ctx, b.checkpointSQL(checkpointCreateSQL))
	switch pgCode(err) {
	case codeUniqueViolation, codeDuplicateTable, codeDuplicateObject:
		return nil
	}
	return err
}

// SetCheckpoint stores value in one statement that checks the lease row;
// see sql/checkpoint_set.sql. The checkpoint table is created on first
// use unless creating tables is forbidden (then by lockrun init).
func (b *Backend) SetCheckpoint(ctx context.Context, key string, token backend.Token, value []byte) error {
	if err := backend.ValidateCheckpoint(key, token, value); err != nil {
		return err
	}
	if value == nil {
		value = []byte{} // the column is NOT NULL
	}
	var stored int64
	err := b.session(ctx, func(ctx context.Context, c *pgx.Conn) error {
		set := func() error {
			tag, err := c.Exec(ctx, b.checkpointSQL(checkpointSetSQL), key, int64(token), b.Table(), value)
			stored = tag.RowsAffected()
			return err
		}
		err := set()
		if isMissingTable(err) && b.create {
			if err = b.createCheckpoints(ctx, c); err == nil {
				err = set()
			}
		}
		return err
	})
	if err != nil {
		return b.fail(fmt.Sprintf("writing the checkpoint of %q", key), err)
	}
	if stored != 1 {
		return fmt.Errorf("%w: checkpoint of %q refused: token %v is not the live holder's", backend.ErrLost, key, token)
	}
	return nil
}

// GetCheckpoint reads key's checkpoint; none when the table is missing.
func (b *Backend) GetCheckpoint(ctx context.Context, key string) (backend.Checkpoint, bool, error) {
	var cp backend.Checkpoint
	if err := backend.ValidateKey(key); err != nil {
		return cp, false, err
	}
	err := b.session(ctx, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT token, value FROM "+b.checkpoints()+" WHERE lease_table = $1 AND key = $2",
			b.Table(), key).Scan(&cp.Token, &cp.Value)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows) || isMissingTable(err):
		return backend.Checkpoint{}, false, nil
	case err != nil:
		return backend.Checkpoint{}, false, b.fail(fmt.Sprintf("reading the checkpoint of %q", key), err)
	}
	return cp, true, nil
}

// ClearCheckpoint deletes key's checkpoint.
func (b *Backend) ClearCheckpoint(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	err := b.session(ctx, func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, "DELETE FROM "+b.checkpoints()+" WHERE lease_table = $1 AND key = $2", b.Table(), key)
		return err
	})
	if isMissingTable(err) {
		return nil
	}
	return b.fail(fmt.Sprintf("clearing the checkpoint of %q", key), err)
}
