package backend

import (
	"fmt"
	"strings"
)

// MaxKeyLen is the longest key every backend accepts.
const MaxKeyLen = 128

// ValidateKey accepts the keys that every backend can store unchanged: 1 to
// MaxKeyLen characters from [A-Za-z0-9._-], starting with a letter or digit.
// The rule is the same for all backends so that a key can move between them,
// and it leaves no room for path tricks in the file backend.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d characters, at most %d", ErrInvalidKey, len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return fmt.Errorf("%w %q: must start with a letter or digit", ErrInvalidKey, key)
		}
		if !alnum && c != '.' && c != '_' && c != '-' {
			return fmt.Errorf("%w %q: character %q not allowed (use letters, digits, '.', '_', '-')", ErrInvalidKey, key, c)
		}
	}
	return nil
}

// ValidateRequest checks what every backend's Acquire needs: a valid key, a
// positive TTL, a limit from 0 to MaxLimit, and a run id, without blanks,
// by which the backend tells this run's lease (and a retry of its acquire)
// from every other.
func ValidateRequest(key string, o AcquireOptions) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if o.TTL <= 0 {
		return fmt.Errorf("%w: lock %q: ttl %v must be positive", ErrInvalidOptions, key, o.TTL)
	}
	if o.RunID == "" || strings.ContainsAny(o.RunID, " \t\r\n") {
		return fmt.Errorf("%w: lock %q: run id %q must be non-empty, without blanks", ErrInvalidOptions, key, o.RunID)
	}
	if o.Limit < 0 || o.Limit > MaxLimit {
		return fmt.Errorf("%w: lock %q: limit %d must be from 1 to %d", ErrInvalidOptions, key, o.Limit, MaxLimit)
	}
	return nil
}
