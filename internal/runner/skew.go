package runner

import (
	"log/slog"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// clockSkewer is a lease that its store expires on the store's own wall
// clock (Redis, PostgreSQL) and that measured that clock against ours at
// the grant, at no extra request.
type clockSkewer interface {
	// ClockSkew is how far the store's clock was at least ahead of ours
	// (negative: behind) at the grant; false when not measured.
	ClockSkew() (time.Duration, bool)
}

// warnSkew warns once, at the grant, when the store's clock and ours
// disagree by more than the safety margin m. The safety model counts on
// the store's clock running at about our rate, not on the two agreeing;
// but clocks that disagree are clocks that NTP may step, and a step of the
// store's clock forward by more than m expires the lease before lockrun's
// SIGKILL.
func warnSkew(log *slog.Logger, lease backend.Lease, m time.Duration) {
	s, ok := lease.(clockSkewer)
	if !ok {
		return
	}
	if d, ok := s.ClockSkew(); ok && d.Abs() > m {
		log.Warn("the backend's clock and this host's disagree by more than the safety margin; a step of the backend's clock as large would cut the lease short: check NTP on both",
			"backend_clock_ahead", d, "margin", m)
	}
}
