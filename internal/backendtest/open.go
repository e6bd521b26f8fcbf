package backendtest

import (
	"context"
	"io"
	"net/url"
	"testing"
)

// OpenURL parses rawURL and opens a backend on it with open (a backend
// package's OpenURL), failing t on either error; the backend is closed
// when the test ends.
func OpenURL[B io.Closer](t testing.TB, rawURL string, open func(context.Context, *url.URL) (B, error)) B {
	t.Helper()
	b, err := TryOpenURL(rawURL, open)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TryOpenURL parses rawURL and opens a backend on it with open, for tests
// of what opening refuses; the caller closes the backend.
func TryOpenURL[B any](rawURL string, open func(context.Context, *url.URL) (B, error)) (B, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var none B
		return none, err
	}
	return open(context.Background(), u)
}
