package app

import (
	"fmt"
	"testing"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/runner"
)

func TestExitCodes(t *testing.T) {
	perm := fmt.Errorf("%w: redis x: NOPERM", backend.ErrPermission)
	conf := fmt.Errorf("%w: no such database", backend.ErrConfig)
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{perm, 77},
		{conf, 78},
		{fmt.Errorf("acquiring: %w", perm), 77},
		// A lock lost because renewals were refused is a lost lock.
		{fmt.Errorf("%w: renewal refused: %w", backend.ErrLost, perm), 76},
		{fmt.Errorf("%w: down", backend.ErrUnavailable), 69},
		{answerFree, 1},
		{answerNotReleased, 2},
		{&runner.ExitError{Code: 3}, 3},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
