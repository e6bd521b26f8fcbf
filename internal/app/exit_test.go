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
		// The runner files what it does not know under 70: a refusal is
		// still 77 or 78.
		{&runner.ExitError{Code: runner.ExitSoftware, Err: perm}, 77},
		{&runner.ExitError{Code: runner.ExitSoftware, Err: conf}, 78},
		// A lock lost because renewals were refused is a lost lock.
		{&runner.ExitError{Code: runner.ExitLost, Err: perm}, 76},
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
