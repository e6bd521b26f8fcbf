package runner

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lockrun/lockrun/backend"
)

func TestFailOpenableOnlyForOutages(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("redis: %w: connection refused", backend.ErrUnavailable), true},
		{fmt.Errorf("%w: the lock was granted 3s after it was asked for, too late to run under a 2s lease", backend.ErrUnavailable), true},
		{fmt.Errorf("timed out after 1s waiting for lock %q: %w", "k", backend.ErrHeld), false},
		{&ExitError{Code: 143, Err: errors.New("interrupted by terminated while waiting")}, false},
		{&ExitError{Code: 143, Err: fmt.Errorf("interrupted: %w", backend.ErrUnavailable)}, false},
		{fmt.Errorf("%w: %w", backend.ErrUnavailable, backend.ErrPermission), false},
		{fmt.Errorf("%w: %w", backend.ErrUnavailable, backend.ErrConfig), false},
		{fmt.Errorf("%w: renewing", backend.ErrLost), false},
		{backend.ErrHeld, false},
		{backend.ErrInvalidURL, false},
		{errors.New("something else"), false},
		{nil, false},
	}
	for _, c := range cases {
		if got := FailOpenable(c.err); got != c.want {
			t.Errorf("FailOpenable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
