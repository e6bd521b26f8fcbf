package app

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/backend/file"
	"github.com/lockrun/lockrun/internal/delegate"
)

// An Opener opens the backend that a URL names.
type Opener func(ctx context.Context, u *url.URL) (backend.Backend, error)

// Clients are the server backends' clients a lockrun program has in it,
// by URL scheme. Every program has the file backend's.
type Clients map[string]Opener

// openBackend opens the backend that raw names by its scheme; an empty raw
// is the embedded file backend in its default directory. A server backend
// whose client this program lacks is opened by the program that has it,
// which replaces this one (see delegate).
func (st *state) openBackend(ctx context.Context, raw string) (backend.Backend, error) {
	if raw == "" {
		return file.OpenDefault()
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password and all
		}
		return nil, usagef("--backend %s: %v", backend.Redact(raw), err)
	}
	if backend.MisplacedUserinfo(u) { // the password would reach a host, path or database name
		return nil, usagef("--backend %s: '@' after the host: percent-encode '/', '?', '#' and '@' in a password (%%2F, %%3F, %%23, %%40)", backend.Redact(raw))
	}
	if u.Scheme == "file" {
		b, err := file.OpenURL(u)
		return b, wrapURL(raw, err)
	}
	if open, ok := st.clients[u.Scheme]; ok {
		b, err := open(ctx, u)
		return b, wrapURL(raw, err)
	}
	if prog, ok := delegate.Programs[u.Scheme]; ok {
		return nil, wrapURL(raw, st.delegate(prog))
	}
	if u.Scheme == "" {
		// Not shown: a typo of a URL may still hold its password.
		return nil, usagef("--backend: not a URL (no scheme): use file:///dir, redis://host, etcd://host, postgres://host/db, zk://host or redlock://h1,h2,h3")
	}
	return nil, usagef("--backend %s: unknown scheme %q: use file, redis, rediss, redlock, redlocks, etcd, etcds, postgres, postgresql, zk or zks", backend.Redact(raw), u.Scheme)
}

// wrapURL names the (redacted) URL in an error from opening it.
func wrapURL(raw string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("--backend %s: %w", backend.Redact(raw), err)
}

// describeBackend is the backend URL the command sees: redacted, and the
// resolved directory for the default file backend.
func describeBackend(raw string, b backend.Backend) string {
	if f, ok := b.(*file.Backend); ok && raw == "" {
		return (&url.URL{Scheme: "file", Path: f.Dir()}).String()
	}
	return backend.Redact(raw)
}
