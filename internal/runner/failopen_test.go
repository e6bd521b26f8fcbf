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
		{&ExitError{Code: ExitUnavailable, Err: fmt.Errorf("x: %w", backend.ErrUnavailable)}, true},
		{&ExitError{Code: ExitBusy, Err: backend.ErrHeld}, false},
		{&ExitError{Code: 143, Err: errors.New("interrupted by terminated while waiting")}, false},
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
