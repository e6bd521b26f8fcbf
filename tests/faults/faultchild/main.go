// Command faultchild is the command lockrun runs in the fault harness: it
// writes to the harness's oracle every few milliseconds while it lives.
package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// The environment says where the oracle is, how long to write, and how
// hard the command is to kill: mode "stubborn" ignores SIGTERM; "escape"
// also starts a grandchild that leaves the process group with setsid,
// ignores SIGTERM and keeps writing with the same token.
const (
	envOracle = "FAULTS_ORACLE"
	envHold   = "FAULTS_HOLD"
	envMode   = "FAULTS_MODE"
	envGrand  = "FAULTS_GRANDCHILD"
	writeGap  = 3 * time.Millisecond
)

func main() {
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
	hold, _ := time.ParseDuration(os.Getenv(envHold))
	switch os.Getenv(envMode) {
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
	case "escape":
		signal.Ignore(syscall.SIGTERM)
		escape(c.(*net.TCPConn))
	}
	writeForever(c, hold)
	os.Exit(0)
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
