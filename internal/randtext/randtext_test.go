package randtext

import (
	"regexp"
	"testing"
)

// TestTextLooksLikeCryptoRand: 26 characters of crypto/rand.Text's
// alphabet, and no two alike in a thousand (128 bits each).
func TestTextLooksLikeCryptoRand(t *testing.T) {
	alphabet := regexp.MustCompile(`^[A-Z2-7]{26}$`)
	seen := map[string]bool{}
	for range 1000 {
		s, err := Text()
		if err != nil {
			t.Fatal(err)
		}
		if !alphabet.MatchString(s) {
			t.Fatalf("Text() = %q, want 26 characters of A-Z and 2-7", s)
		}
		if seen[s] {
			t.Fatalf("Text() returned %q twice", s)
		}
		seen[s] = true
	}
}

// TestDeviceFallbackFills: the /dev/urandom path fills the whole buffer
// with bytes that are not all zero.
func TestDeviceFallbackFills(t *testing.T) {
	b := make([]byte, 64)
	if err := readDevice(b); err != nil {
		t.Fatal(err)
	}
	zero := 0
	for _, c := range b {
		if c == 0 {
			zero++
		}
	}
	if zero == len(b) {
		t.Fatal("readDevice left the buffer all zero")
	}
}
