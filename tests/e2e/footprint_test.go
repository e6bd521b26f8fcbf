package e2e_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/lockrun/lockrun/internal/pagetrim"
)

// A lock held for long keeps mapped only the part of lockrun that its
// renewals run: the pages its start-up mapped are unmapped at the first
// renewal (every 500ms at this TTL), and do not all come back.
func TestHolderUnmapsItsStartUpPages(t *testing.T) {
	e, ready := env(t), filepath.Join(t.TempDir(), "ready")
	holder := start(t, e, "run", "--ttl", "1500ms", "k", "--", "sh", "-c", "echo > "+ready+"; sleep 10")
	waitFile(t, ready)
	pid := holder.Process.Pid
	before, err := pagetrim.Resident(pid)
	if err != nil {
		t.Fatal(err)
	}
	var after int64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if after, err = pagetrim.Resident(pid); err != nil {
			t.Fatal(err)
		}
		if after < before*3/4 {
			t.Logf("lockrun's program resident: %d kB at the start, %d kB after renewals", before>>10, after>>10)
			return
		}
	}
	t.Errorf("lockrun's program resident: %d kB at the start, still %d kB after 5s of renewals; want its start-up pages unmapped", before>>10, after>>10)
}
