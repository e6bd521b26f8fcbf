package runner

import (
	"log/slog"

	"github.com/lockrun/lockrun/internal/pagetrim"
)

// trimAtFirstRenewal returns a hook for every extension of the lease (the
// grant, then each renewal) that, at the first renewal, unmaps the pages
// of lockrun's program that its start-up mapped (package pagetrim), in a
// goroutine of its own: from then on a lock held for hours keeps mapped
// only what its renewals use. After the first renewal, not at the grant,
// so that the renewal's own one-time work (a server backend's first
// keep-alive stream, say) does not map its pages back.
func trimAtFirstRenewal(log *slog.Logger) func() {
	extensions := 0 // the keeper calls its hook from one goroutine
	return func() {
		if extensions++; extensions != 2 {
			return
		}
		go func() {
			n, err := pagetrim.Program()
			if err != nil {
				log.Debug("could not unmap the program's start-up pages", "err", err)
				return
			}
			log.Debug("unmapped the program's start-up pages", "mapped_bytes", n)
		}()
	}
}
