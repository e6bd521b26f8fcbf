package file

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/lockrun/lockrun/backend"
)

// List reports every held lock whose key starts with prefix, sorted by
// key: every lock file in the directory that is flocked or within its
// min-hold. Files it may not read (another user's, in a shared directory)
// and files that are not lockrun's are skipped.
func (b *Backend) List(ctx context.Context, prefix string) ([]backend.Status, error) {
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return nil, fmt.Errorf("%w: listing %s: %w", backend.ErrUnavailable, b.dir, err)
	}
	var held []backend.Status
	for _, e := range entries {
		key, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || !strings.HasPrefix(key, prefix) || backend.ValidateKey(key) != nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st, err := b.Inspect(ctx, key)
		switch {
		case err == nil && st.Held:
			held = append(held, st)
		case err != nil && !errors.Is(err, backend.ErrPermission):
			return nil, err
		}
	}
	slices.SortFunc(held, func(a, b backend.Status) int { return strings.Compare(a.Key, b.Key) })
	return held, nil
}
