package bench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// timed runs argv to its end and returns its wall time.
func timed(argv []string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	begin := time.Now()
	err := cmd.Run()
	return time.Since(begin), describe(argv, err)
}

// describe names the command in a failure.
func describe(argv []string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
}

// proc is a tool started with stamp as its command, once stamp has said
// that it runs.
type proc struct {
	argv  []string
	cmd   *exec.Cmd
	child int       // stamp's pid
	start time.Time // when stamp started, on its clock
}

// startStamped starts argv, whose command is a stamp, and returns once the
// stamp has printed "START PID", i.e. once the tool holds the lock.
func startStamped(argv []string) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, describe(argv, err)
	}
	p := &proc{argv: argv, cmd: cmd}
	var ns int64
	line, err := bufio.NewReader(out).ReadString('\n')
	if err == nil {
		_, err = fmt.Sscan(line, &ns, &p.child)
	}
	if err != nil {
		p.kill()
		return nil, describe(argv, fmt.Errorf("no start line from stamp (%q): %w", line, err))
	}
	p.start = time.Unix(0, ns)
	return p, nil
}

// kill ends the tool and its stamp at once, and reaps the tool.
func (p *proc) kill() {
	if p.child > 0 {
		_ = syscall.Kill(p.child, syscall.SIGKILL) // a peer may leave it orphaned
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// exitCode waits for the tool and returns its exit status.
func (p *proc) exitCode() int {
	err := p.cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// statusKB reads a "kB" field of /proc/PID/status, such as VmHWM; 0 when
// the process is gone.
func statusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	return fieldValue(string(b), field)
}

// fieldValue reads the number after "field:" in a /proc status text.
func fieldValue(status, field string) int64 {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// children lists pid's child processes.
func children(pid int) []int {
	dirs, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	var out []int
	for _, d := range dirs {
		b, _ := os.ReadFile(filepath.Join(d, "children"))
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// deathWatch tells when a process that is not our child exits, through a
// pidfd: the kernel wakes the poll at the exit, nothing is polled.
type deathWatch struct{ fd int }

func watchDeath(pid int) (*deathWatch, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return &deathWatch{fd: fd}, nil
}

// wait returns when the process died, or false if it still ran after
// timeout.
func (w *deathWatch) wait(timeout time.Duration) (time.Time, bool) {
	defer unix.Close(w.fd)
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left < 0 {
			return time.Time{}, false
		}
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left/time.Millisecond)+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n == 0 {
			return time.Time{}, false
		}
		return time.Now(), true
	}
}
