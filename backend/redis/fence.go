package redis

import (
	"context"
	_ "embed" // the library lives in lua/fence_lib.lua
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend"
)

// FenceError is the first word of the error that the fence functions
// reply with when a token is lower than the highest recorded.
const FenceError = "FENCED"

// FenceLibrary is the name of the Redis function library that Init loads:
// lockrun_fence and lockrun_fenced_set (see lua/fence_lib.lua).
const FenceLibrary = "lockrun"

//go:embed lua/fence_lib.lua
var fenceLib string

// Init loads the fence functions (FUNCTION LOAD REPLACE), so that
// `FCALL lockrun_fence 1 FENCEKEY TOKEN` works on this server. Safe to
// repeat. It needs Redis 7 and, on a server with ACLs, the FUNCTION
// permission. Functions are kept like data: replicated, and persisted
// only when the server persists.
func (b *Backend) Init(ctx context.Context) error { return LoadFence(ctx, b.client, b.url) }

// LoadFence is Init on the server c talks to, which where names (a
// redacted URL or an address) in its errors.
func LoadFence(ctx context.Context, c *goredis.Client, where string) error {
	err := c.FunctionLoadReplace(ctx, fenceLib).Err()
	if err == nil {
		return nil
	}
	var answered goredis.Error
	switch msg := err.Error(); {
	case !errors.As(err, &answered):
		return fmt.Errorf("%w: redis %s: loading function library %q: %w", class(err), where, FenceLibrary, err)
	case strings.HasPrefix(msg, "NOPERM"):
		return fmt.Errorf("%w: redis %s: loading function library %q: %w", backend.ErrPermission, where, FenceLibrary, err)
	case strings.Contains(msg, "unknown command"):
		return fmt.Errorf("%w: redis %s: loading function library %q needs Redis 7 or later (FUNCTION LOAD): %w", backend.ErrConfig, where, FenceLibrary, err)
	}
	return fmt.Errorf("%w: redis %s: loading function library %q: %w", backend.ErrConfig, where, FenceLibrary, err)
}
