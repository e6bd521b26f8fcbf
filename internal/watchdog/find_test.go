package watchdog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// lockrun starts the watchdog program from its own directory; without one
// there (a `go install` of ./cmd/lockrun alone) it re-executes itself, and
// says why.
func TestBesideFindsTheProgramOrFallsBackToSelf(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "lockrun")
	wd := filepath.Join(dir, ProgramName)
	if p, why := Beside(exe); why == nil || p.Path != Self.Path || len(p.Args) != 1 || p.Args[0] != Subcommand {
		t.Errorf("no %s beside lockrun: got %+v, %v; want Self and why", ProgramName, p, why)
	}
	if err := os.WriteFile(wd, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Without an x bit no one may execute it, root included.
	if p, why := Beside(exe); why == nil || p.Path != Self.Path {
		t.Errorf("a %s that may not be executed: got %+v, %v; want Self", ProgramName, p, why)
	}
	if err := os.Chmod(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	if p, why := Beside(exe); why != nil || p.Path != wd || len(p.Args) != 0 {
		t.Errorf("with %s beside lockrun: got %+v, %v; want it, with no arguments of its own", wd, p, why)
	}
	if err := os.Remove(wd); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	if p, why := Beside(exe); why == nil || p.Path != Self.Path {
		t.Errorf("a directory named %s: got %+v, %v; want Self", ProgramName, p, why)
	}
}

// A watchdog started by a lockrun of another release refuses at once,
// before it reads a message it might misread; one started by hand says it
// is not a command.
func TestMainRefusesAnotherProtocol(t *testing.T) {
	t.Setenv(envProtocol, "0")
	if err := Main(os.Stdin, []string{"1"}); !errors.Is(err, ErrProtocol) {
		t.Errorf("protocol 0: %v, want ErrProtocol", err)
	}
	t.Setenv(envProtocol, "")
	if err := Main(os.Stdin, []string{"1"}); !errors.Is(err, ErrUsage) {
		t.Errorf("no protocol: %v, want ErrUsage", err)
	}
}
