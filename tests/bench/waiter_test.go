package bench

import (
	"path/filepath"
	"strings"
	"testing"
)

// A contender that exits while the others queue is reported at once,
// with its last line, rather than waited for until the queue's timeout.
func TestAContenderThatExitsIsReported(t *testing.T) {
	dir := t.TempDir()
	live, err := startWaiter([]string{"sleep", "30"}, filepath.Join(dir, "live"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { live.cmd.Process.Kill(); live.wait() }()
	if err := exitedEarly([]*waiter{live}); err != nil {
		t.Fatalf("exitedEarly with a contender still waiting = %v", err)
	}
	dead, err := startWaiter([]string{"sh", "-c", "echo connecting; echo 'backend unavailable' >&2; exit 69"}, filepath.Join(dir, "dead"))
	if err != nil {
		t.Fatal(err)
	}
	<-dead.done
	err = exitedEarly([]*waiter{live, dead})
	if err == nil || !strings.Contains(err.Error(), "exit status 69") || !strings.Contains(err.Error(), "backend unavailable") {
		t.Errorf("exitedEarly after a contender exited 69 = %v; want its status and last line", err)
	}
}
