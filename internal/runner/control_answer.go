package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockrun/lockrun/backend"
)

// answer runs one request. A lease lost locally refuses at once; the
// backend decides the rest, atomically on its server.
func (c *control) answer(ctx context.Context, req ControlRequest) ControlAnswer {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || isClosed(c.lost) {
		return c.refused()
	}
	switch req.Op {
	case OpFenceCheck:
		st, err := c.store.Inspect(ctx, c.key)
		if err != nil {
			return failed(err)
		}
		if !st.HoldsToken(c.token) { // any holder of a semaphore, not only the first
			return c.refused()
		}
		return ControlAnswer{Status: StatusOK, Token: c.token.String()}
	case OpCheckpointSet, OpCheckpointGet:
		if c.limit > 1 {
			return ControlAnswer{Status: StatusError, Kind: KindUsage, Message: fmt.Sprintf(
				"lock %q is a semaphore (--limit %d): checkpoints belong to a plain lock, whose one holder's progress the next resumes",
				c.key, c.limit)}
		}
		cp, ok := c.store.(backend.Checkpointer)
		if !ok {
			return ControlAnswer{Status: StatusError, Kind: KindUsage, Message: "this backend keeps no checkpoints"}
		}
		if req.Op == OpCheckpointGet {
			return c.get(ctx, cp)
		}
		if err := cp.SetCheckpoint(ctx, c.key, c.token, req.Value); err != nil {
			return failed(err)
		}
		return ControlAnswer{Status: StatusOK, Token: c.token.String()}
	}
	return ControlAnswer{Status: StatusError, Kind: KindUsage, Message: fmt.Sprintf("unknown request %q", req.Op)}
}

func (c *control) get(ctx context.Context, cp backend.Checkpointer) ControlAnswer {
	v, ok, err := cp.GetCheckpoint(ctx, c.key)
	switch {
	case err != nil:
		return failed(err)
	case !ok:
		return ControlAnswer{Status: StatusNone}
	}
	return ControlAnswer{Status: StatusOK, Value: v.Value, Token: v.Token.String()}
}

func (c *control) refused() ControlAnswer {
	return ControlAnswer{Status: StatusLost,
		Message: fmt.Sprintf("lock %q: token %v is no longer the holder's: refused", c.key, c.token)}
}

// failed is the answer for a backend error, of the kind its sentinel says.
func failed(err error) ControlAnswer {
	kind := KindInternal
	switch {
	case errors.Is(err, backend.ErrLost):
		return ControlAnswer{Status: StatusLost, Message: err.Error()}
	case errors.Is(err, backend.ErrInvalidOptions), errors.Is(err, backend.ErrInvalidKey):
		kind = KindUsage
	case errors.Is(err, backend.ErrPermission):
		kind = KindPermission
	case errors.Is(err, backend.ErrConfig):
		kind = KindConfig
	case errors.Is(err, backend.ErrUnavailable):
		kind = KindUnavailable
	}
	return ControlAnswer{Status: StatusError, Kind: kind, Message: err.Error()}
}
