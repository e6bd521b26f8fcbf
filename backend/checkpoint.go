package backend

import (
	"context"
	"fmt"
)

// MaxCheckpoint is the largest checkpoint value a backend stores.
const MaxCheckpoint = 64 << 10

// Checkpoint is a key's progress record and the token of the holder that
// wrote it.
type Checkpoint struct {
	Value []byte
	Token Token
}

// Checkpointer is a backend that keeps one checkpoint per key, next to
// the lock, so that a holder that takes over can resume where the last
// one stopped. Every method is one atomic step on the server.
type Checkpointer interface {
	// SetCheckpoint stores value for key only while token is the token of
	// the key's current, live holder; otherwise it stores nothing and
	// returns an error wrapping ErrLost. So once a newer holder has been
	// granted the lock, an older holder's late checkpoint is refused.
	// A value longer than MaxCheckpoint wraps ErrInvalidOptions.
	SetCheckpoint(ctx context.Context, key string, token Token, value []byte) error
	// GetCheckpoint returns the last checkpoint stored for key, and false
	// when there is none.
	GetCheckpoint(ctx context.Context, key string) (Checkpoint, bool, error)
	// ClearCheckpoint removes key's checkpoint, whoever holds the lock.
	ClearCheckpoint(ctx context.Context, key string) error
}

// ValidateCheckpoint checks a SetCheckpoint request before it is sent.
func ValidateCheckpoint(key string, token Token, value []byte) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if token == 0 {
		return fmt.Errorf("%w: checkpoint of %q: token 0 is never issued", ErrInvalidOptions, key)
	}
	if len(value) > MaxCheckpoint {
		return fmt.Errorf("%w: checkpoint of %q: %d bytes, at most %d", ErrInvalidOptions, key, len(value), MaxCheckpoint)
	}
	return nil
}
