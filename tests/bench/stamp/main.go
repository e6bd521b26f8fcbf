// Command stamp is the command that lockrun's benchmark runs under a lock,
// and under the peer tools' locks alike, so that every tool is timed the
// same way. It takes CLOCK_REALTIME as soon as it runs and prints
// "START PID" on stdout; it may wait for a gate or hold for a while; then
// it takes the time again and appends "START END PID PPID WAKEUPS" to a
// log, one line in one write (O_APPEND), so that concurrent stamps never
// interleave.
//
//	stamp [-gate FIFO] [-hold DURATION] [-stubborn] [-parent-wakeups] [-log FILE]
//
// -gate blocks until the benchmark opens and closes the FIFO (a gate that
// costs no polling), -stubborn ignores SIGTERM, as a command that must be
// SIGKILLed would. With -parent-wakeups, WAKEUPS is how many context
// switches the parent (the tool that took the lock) had made by the time
// stamp started, summed over its threads; otherwise 0.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lockrun/lockrun/internal/procfs"
)

func main() {
	start := time.Now().UnixNano()
	gate := flag.String("gate", "", "FIFO to read to its end before going on")
	hold := flag.Duration("hold", 0, "how long to run")
	stubborn := flag.Bool("stubborn", false, "ignore SIGTERM")
	log := flag.String("log", "", "file to append START END PID PPID WAKEUPS to")
	parent := flag.Bool("parent-wakeups", false, "log the parent's context switches")
	flag.Parse()
	var wakeups int64
	if *parent {
		wakeups = procfs.Switches(os.Getppid())
	}
	if *stubborn {
		signal.Ignore(syscall.SIGTERM)
	}
	fmt.Printf("%d %d\n", start, os.Getpid())
	if err := run(*gate, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "stamp:", err)
		os.Exit(1)
	}
	if *log == "" {
		return
	}
	line := fmt.Sprintf("%d %d %d %d %d\n", start, time.Now().UnixNano(), os.Getpid(), os.Getppid(), wakeups)
	if err := appendLine(*log, line); err != nil {
		fmt.Fprintln(os.Stderr, "stamp:", err)
		os.Exit(1)
	}
}

// run waits for the gate to open, then holds.
func run(gate string, hold time.Duration) error {
	if gate != "" {
		f, err := os.Open(gate) // blocks until the benchmark opens it to write
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, f) // and returns once it closed it
		f.Close()
		if err != nil {
			return err
		}
	}
	time.Sleep(hold)
	return nil
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
