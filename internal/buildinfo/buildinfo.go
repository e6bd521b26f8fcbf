// Package buildinfo says which build of lockrun this program is. It is
// light (no package of its own to initialise but runtime/debug's), so
// that lockrun's earliest work can name its release.
package buildinfo

import (
	"runtime/debug"
	"strings"
)

// Set by the build with -ldflags "-X github.com/lockrun/lockrun/internal/buildinfo.version=v1.2.3
// -X ...buildinfo.commit=SHA -X ...buildinfo.date=2026-12-01T08:00:00Z" (make build and goreleaser do).
var version, commit, date string

// Version is what --version prints after "lockrun version ": the
// stamped version, commit and date; else what the Go toolchain recorded
// (the module version of a go install, the VCS revision of a build in a
// clone); else "dev".
func Version() string {
	v, c, d := version, commit, date
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && c == "":
				c = s.Value
			case s.Key == "vcs.time" && d == "":
				d = s.Value
			}
		}
	}
	return describeVersion(v, c, d)
}

// describeVersion is "v (commit c, d)", leaving out what is unknown.
func describeVersion(v, c, d string) string {
	if v == "" {
		v = "dev"
	}
	var extra []string
	if c != "" {
		extra = append(extra, "commit "+c[:min(len(c), 12)])
	}
	if d != "" {
		extra = append(extra, d)
	}
	if len(extra) == 0 {
		return v
	}
	return v + " (" + strings.Join(extra, ", ") + ")"
}
