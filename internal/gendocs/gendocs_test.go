package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lockrun/lockrun/internal/app"
)

// needTool finds name on PATH; without it the test is skipped on a laptop
// and fails in CI, where .ci/services.sh installs it.
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed (CI is set; make test installs it)", name)
	}
	t.Skipf("%s is not installed: run make test to install it", name)
	return ""
}

func runCommand(t *testing.T) command {
	t.Helper()
	for _, c := range describe(app.Definition()).Commands {
		if c.Name == "run" {
			return c
		}
	}
	t.Fatal("the definition has no run command")
	return command{}
}

// TestManPageNamesEveryFlagOfRun renders the man page as man(1) shows it
// and looks for every spelling of every flag of run, and its variable.
func TestManPageNamesEveryFlagOfRun(t *testing.T) {
	man := needTool(t, "man")
	dir := t.TempDir()
	if err := write(dir, page{Version: "v9.9.9", Date: "2026-12-01"}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(man, "--warnings", "-l", filepath.Join(dir, "lockrun.1"))
	cmd.Env = append(os.Environ(), "MANWIDTH=200", "MAN_KEEP_FORMATTING=", "MANPAGER=cat", "PAGER=cat")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("man -l: %v\n%s", err, stderr.String())
	}
	text := string(out)
	run := runCommand(t)
	if len(run.Flags) < 10 {
		t.Fatalf("run has %d flags; the definition was not read", len(run.Flags))
	}
	section := subsection(t, text, "lockrun run ")
	for _, o := range run.Flags {
		for _, s := range append(o.spellings(), o.Env...) {
			if !containsWord(section, s) {
				t.Errorf("the man page's run section does not name %s", s)
			}
		}
		if first, _, _ := strings.Cut(o.Usage, ":"); !strings.Contains(strings.Join(strings.Fields(section), " "), upperFirst(first)) {
			t.Errorf("the man page's run section does not say what %s does (%q)", o.spellings()[0], o.Usage)
		}
	}
	for _, want := range []string{"lockrun v9.9.9", "2026-12-01", "EXIT STATUS", "LOCKRUN_FENCING_TOKEN"} {
		if !strings.Contains(text, want) {
			t.Errorf("the man page does not say %q", want)
		}
	}
}

// subsection is the part of the COMMANDS section of the rendered page
// whose heading starts with heading, up to the next command's.
func subsection(t *testing.T, text, heading string) string {
	t.Helper()
	_, commands, ok := strings.Cut(text, "\nCOMMANDS")
	start := strings.Index(commands, "\n   "+heading)
	if !ok || start < 0 {
		t.Fatalf("no COMMANDS subsection %q in the man page:\n%s", heading, text)
	}
	rest := commands[start+1:]
	if end := strings.Index(rest[1:], "\n   lockrun "); end >= 0 {
		rest = rest[:end+1]
	}
	if loc := topHeading.FindStringIndex(rest); loc != nil {
		rest = rest[:loc[0]]
	}
	return rest
}

var topHeading = regexp.MustCompile(`\n\n[A-Z]`)

// containsWord reports whether text has s with no letter, digit or dash
// right before or after it (so --wait is not found inside --waiter).
func containsWord(text, s string) bool {
	word := func(b byte) bool {
		return b == '-' || b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
	}
	for i := 0; ; {
		j := strings.Index(text[i:], s)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(s)
		if (start == 0 || !word(text[start-1])) && (end == len(text) || !word(text[end])) {
			return true
		}
		i = start + 1
	}
}

func TestValueHintsNameFlagsOfLockrun(t *testing.T) {
	p := describe(app.Definition())
	for name := range valueHints {
		if spellingsOf(p, name) == nil {
			t.Errorf("valueHints names --%s, which no command has", name)
		}
	}
}

// A flag's `backquoted` word names its value, as in lockrun's own help,
// and no backquote reaches the page.
func TestBackquotedWordNamesTheValue(t *testing.T) {
	for _, o := range runCommand(t).Flags {
		if strings.Contains(o.Usage, "`") {
			t.Errorf("--%s: usage %q keeps a backquote", o.Names[0], o.Usage)
		}
		if want := map[string]string{"limit": "N", "metrics-file": "PATH"}[o.Names[0]]; want != "" && !strings.Contains(flagItem(o), `\fI`+want+`\fR`) {
			t.Errorf("--%s: %q; want its value named %s", o.Names[0], flagItem(o), want)
		}
	}
}
