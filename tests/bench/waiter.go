package bench

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// waiter is one queued contender of a chain, reaped in the background so
// that the bench sees at once a contender that exits before its turn.
type waiter struct {
	cmd    *exec.Cmd
	stderr string // the file its stderr goes to
	done   chan struct{}
	err    error // its exit, once done is closed
}

// startWaiter starts argv with its stderr in the file stderr.
func startWaiter(argv []string, stderr string) (*waiter, error) {
	f, err := os.Create(stderr)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own copy
	w := &waiter{cmd: exec.Command(argv[0], argv[1:]...), stderr: stderr, done: make(chan struct{})}
	w.cmd.Stderr = f
	if err := w.cmd.Start(); err != nil {
		return nil, describe(argv, err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	return w, nil
}

// wait waits for the waiter to exit, and says how it failed if it did.
func (w *waiter) wait() error {
	<-w.done
	return w.failure()
}

func (w *waiter) failure() error {
	if w.err == nil {
		return nil
	}
	b, _ := os.ReadFile(w.stderr)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return fmt.Errorf("%w; its last line: %s", describe(w.cmd.Args, w.err), lines[len(lines)-1])
}

// exitedEarly is an error naming the first of ws that has exited, which a
// contender does not do while it waits for its turn; nil if none has.
func exitedEarly(ws []*waiter) error {
	for _, w := range ws {
		select {
		case <-w.done:
			if err := w.failure(); err != nil {
				return fmt.Errorf("a contender exited while queued: %w", err)
			}
			return fmt.Errorf("a contender exited while queued: %s", strings.Join(w.cmd.Args, " "))
		default:
		}
	}
	return nil
}
