package backend

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

var errDown, errDenied = errors.New("down"), errors.New("denied")

func TestProbe(t *testing.T) {
	for name, tc := range map[string]struct {
		results []error // try's results in turn; nil after the list
		want    error
		tries   int
		took    time.Duration
	}{
		"up at once":          {nil, nil, 1, 0},
		"up at the third":     {[]error{errDown, errDown}, nil, 3, 600 * time.Millisecond},
		"down throughout":     {[]error{errDown, errDown, errDown, errDown}, errDown, 3, 600 * time.Millisecond},
		"final at the first":  {[]error{errDenied}, errDenied, 1, 0},
		"final at the second": {[]error{errDown, errDenied}, errDenied, 2, 200 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tries, begin := 0, time.Now()
				err := Probe(t.Context(), func(context.Context) error {
					tries++
					if tries <= len(tc.results) {
						return tc.results[tries-1]
					}
					return nil
				}, func(err error) bool { return errors.Is(err, errDenied) })
				if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) || tries != tc.tries || time.Since(begin) != tc.took {
					t.Errorf("Probe = %v after %d tries and %v; want %v after %d and %v", err, tries, time.Since(begin), tc.want, tc.tries, tc.took)
				}
			})
		})
	}
}

func TestProbeStopsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cause := errors.New("interrupted")
		ctx, cancel := context.WithCancelCause(t.Context())
		time.AfterFunc(100*time.Millisecond, func() { cancel(cause) })
		begin := time.Now()
		err := Probe(ctx, func(context.Context) error { return errDown }, func(error) bool { return false })
		if !errors.Is(err, cause) || time.Since(begin) != 100*time.Millisecond {
			t.Errorf("Probe = %v after %v; want the context's cause after 100ms", err, time.Since(begin))
		}
	})
}
