// Command faultchild is the command lockrun runs in the fault harness: it
// writes to the harness's oracle every few milliseconds while it lives.
package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// The environment says where the oracle is, how long to write, and how
// hard the command is to kill: mode "stubborn" survives SIGTERM and tells
// the oracle it came ("t TOKEN PID SEQ"); "escape" ignores SIGTERM and
// also starts a grandchild that leaves the process group with setsid,
// ignores SIGTERM and keeps writing with the same token. Mode "hog" is no
// command: a busy loop for FAULTS_HOLD, the CPU pressure beside a case.
const (
	envOracle = "FAULTS_ORACLE"
	envHold   = "FAULTS_HOLD"
	envMode   = "FAULTS_MODE"
	envGrand  = "FAULTS_GRANDCHILD"
	writeGap  = 3 * time.Millisecond
)

func main() {
	hold, _ := time.ParseDuration(os.Getenv(envHold))
	if os.Getenv(envMode) == "hog" {
		spin(hold)
		os.Exit(0)
	}
	if os.Getenv(envGrand) != "" {
		signal.Ignore(syscall.SIGTERM)
		writeForever(os.NewFile(3, "oracle"), time.Hour)
		os.Exit(0)
	}
	c, err := net.Dial("tcp", os.Getenv(envOracle))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(3)
	}
	w := &lineWriter{w: c}
	switch os.Getenv(envMode) {
	case "stubborn":
		reportTerm(w)
	case "escape":
		signal.Ignore(syscall.SIGTERM)
		escape(c.(*net.TCPConn))
	}
	writeForever(w, hold)
	os.Exit(0)
}

// spin keeps one core busy for d: the clock is read from the vDSO, so
// the loop never leaves user space.
func spin(d time.Duration) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
	}
}

// lineWriter writes whole lines from several goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  writer
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// reportTerm survives SIGTERM and reports each one to the oracle.
func reportTerm(w writer) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		token := os.Getenv("LOCKRUN_FENCING_TOKEN")
		for seq := 0; ; seq++ {
			<-sigs
			fmt.Fprintf(w, "t %s %d %d\n", token, os.Getpid(), seq)
		}
	}()
}

// escape starts a grandchild in its own session holding the connection.
func escape(c *net.TCPConn) {
	f, err := c.File()
	if err != nil {
		return
	}
	defer f.Close()
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), envGrand+"=1")
	cmd.ExtraFiles = []*os.File{f}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	_ = cmd.Start()
}

type writer interface {
	Write([]byte) (int, error)
}

func writeForever(w writer, hold time.Duration) {
	token := os.Getenv("LOCKRUN_FENCING_TOKEN")
	end := time.Now().Add(hold)
	for seq := 0; time.Now().Before(end); seq++ {
		if _, err := fmt.Fprintf(w, "w %s %d %d\n", token, os.Getpid(), seq); err != nil {
			return
		}
		time.Sleep(writeGap)
	}
}
