package postgres

import (
	"fmt"

	"github.com/lockrun/lockrun/backend"
)

// codeNumericOutOfRange is the SQLSTATE of a bigint that overflows: the
// token column at its limit, 2^63-1, when acquire.sql adds one to it.
const codeNumericOutOfRange = "22003"

// tokenRange marks the acquire statement's overflow of the token column
// as backend.ErrTokenRange: the grant fails, and nothing was written.
func tokenRange(err error) error {
	if pgCode(err) == codeNumericOutOfRange {
		return fmt.Errorf("%w: %w", backend.ErrTokenRange, err)
	}
	return err
}
