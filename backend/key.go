package backend

import "fmt"

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
