package postgres

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockrun/lockrun/backend"
)

// fail wraps a failed operation's error as ErrUnavailable (or, when the
// server refused in a way retrying cannot cure, ErrPermission or
// ErrConfig: see class), with the backend's redacted address, in one line;
// a *backend.HeldError or *backend.LimitError passes unchanged. Renewals
// and releases decide about ErrLost themselves.
func (b *Backend) fail(what string, err error) error {
	var held *backend.HeldError
	var limit *backend.LimitError
	if err == nil || errors.As(err, &held) || errors.As(err, &limit) {
		return err
	}
	switch {
	case isMissingTable(err):
		what += fmt.Sprintf(" (create the table with 'lockrun init --backend %s', or drop %s=false)", b.addr, ParamCreateTable)
	case pgCode(err) == codeUndefinedColumn:
		what += fmt.Sprintf(" (the table is from an older lockrun: upgrade it with 'lockrun init --backend %s')", b.addr)
	}
	return fmt.Errorf("%w: postgres %s: %s: %w", class(err), b.addr, what, oneLine{err})
}

// class is the sentinel for a failure by its SQLSTATE: who we are or what
// we may do was refused (class 28, insufficient_privilege) is
// backend.ErrPermission; a database, schema, table or column that is not
// there is backend.ErrConfig; anything else, above all no answer, is
// backend.ErrUnavailable.
func class(err error) error {
	code := pgCode(err)
	switch {
	case strings.HasPrefix(code, "28"), code == codeInsufficientPrivilege:
		return backend.ErrPermission
	case code == codeInvalidCatalogName, code == codeInvalidSchemaName, code == codeUndefinedTable,
		code == codeUndefinedColumn, code == codeDatatypeMismatch:
		return backend.ErrConfig
	}
	return backend.ErrUnavailable
}

// oneLine is an error whose message fits on one line and says each thing
// once. pgx writes a failed connection's message with one line per
// attempt, and with sslmode=allow it tries each host twice (without TLS,
// then with), which mostly fail alike.
type oneLine struct{ err error }

func (e oneLine) Error() string {
	var ce *pgconn.ConnectError
	if errors.As(e.err, &ce) {
		return fmt.Sprintf("connecting as user %s to database %s: %s", ce.Config.User, ce.Config.Database, distinct(ce.Unwrap()))
	}
	return distinct(e.err)
}

func (e oneLine) Unwrap() error { return e.err }

// distinct is err's message on one line, with the messages that errors
// joined by errors.Join repeat said once.
func distinct(err error) string {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var msgs []string
		for _, err := range joined.Unwrap() {
			if m := distinct(err); !slices.Contains(msgs, m) {
				msgs = append(msgs, m)
			}
		}
		return strings.Join(msgs, "; ")
	}
	if inner := errors.Unwrap(err); inner != nil {
		if prefix, ok := strings.CutSuffix(err.Error(), inner.Error()); ok {
			return flatten(prefix) + distinct(inner)
		}
	}
	return flatten(err.Error())
}

// flatten puts a multi-line message on one line.
func flatten(msg string) string {
	return strings.NewReplacer(":\n\t", " ", "\n\t", "; ", "\n", "; ").Replace(msg)
}
