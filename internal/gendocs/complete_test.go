package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func completions(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := write(dir, page{Version: "dev"}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "completions")
}

// bashComplete is what the bash completion offers for line, whose last
// word is being completed.
func bashComplete(t *testing.T, bash, script, line string) []string {
	t.Helper()
	words := strings.Split(line, " ")
	prog := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _lockrun; printf '%s\n' "${COMPREPLY[@]}"`
	out, err := exec.Command(bash, append([]string{"-c", prog, "bash", script}, words...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("bash completion of %q: %v\n%s", line, err, out)
	}
	return strings.Fields(string(out))
}

// TestBashCompletesCommandsFlagsAndValues drives the generated bash
// completion as bash's complete -F does.
func TestBashCompletesCommandsFlagsAndValues(t *testing.T) {
	bash := needTool(t, "bash")
	script := filepath.Join(completions(t), "lockrun.bash")
	if out, err := exec.Command(bash, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	for _, o := range runCommand(t).Flags {
		for _, s := range o.spellings() {
			if got := bashComplete(t, bash, script, "lockrun run "+s); !slices.Contains(got, s) {
				t.Errorf("lockrun run %s<TAB> offers %q, not %s", s, got, s)
			}
		}
	}
	cases := map[string][]string{
		"lockrun r":                 {"release", "run"},
		"lockrun run --log-format ": {"json", "text"},
		"lockrun status -b et":      {"etcd://", "etcds://"},
		"lockrun run --ttl ":        nil,
		"lockrun run k -- --":       nil, // the command's own arguments, not lockrun's flags
	}
	dir := filepath.Dir(script)
	cases["lockrun run --ttl 5s k -- cat "+dir+"/lockrun.ba"] = []string{script}
	for line, want := range cases {
		got := bashComplete(t, bash, script, line)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s<TAB> offers %q, want %q", line, got, want)
		}
	}
}

// TestFishCompletesCommandsFlagsAndValues asks fish itself (complete -C).
func TestFishCompletesCommandsFlagsAndValues(t *testing.T) {
	fish := needTool(t, "fish")
	script := filepath.Join(completions(t), "lockrun.fish")
	complete := func(line string) []string {
		out, err := exec.Command(fish, "--no-config", "-c", `source $argv[1]; complete -C $argv[2]`, script, line).CombinedOutput()
		if err != nil {
			t.Fatalf("fish completion of %q: %v\n%s", line, err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			got = append(got, strings.SplitN(l, "\t", 2)[0])
		}
		return got
	}
	for _, o := range runCommand(t).Flags {
		s := o.spellings()[0]
		if got := complete("lockrun run " + s); !slices.Contains(got, s) {
			t.Errorf("lockrun run %s<TAB> offers %q, not %s", s, got, s)
		}
	}
	if got := complete("lockrun run --log-format "); !slices.Equal(got, []string{"json", "text"}) {
		t.Errorf("--log-format<TAB> offers %q", got)
	}
	if got := complete("lockrun run k -- /bin/tru"); !slices.Contains(got, "/bin/true") {
		t.Errorf("the command after -- is not completed: %q", got)
	}
}

// TestZshCompletionParses checks the zsh function with zsh's parser; zsh
// completion needs a terminal to drive, which this test does not fake.
func TestZshCompletionParses(t *testing.T) {
	zsh := needTool(t, "zsh")
	script := filepath.Join(completions(t), "_lockrun")
	if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	text, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range runCommand(t).Flags {
		if !strings.Contains(string(text), "'"+o.spellings()[0]) && !strings.Contains(string(text), ","+o.spellings()[0]+"}") && !strings.Contains(string(text), "{"+o.spellings()[0]+",") {
			t.Errorf("_lockrun has no spec for %s", o.spellings()[0])
		}
	}
}
