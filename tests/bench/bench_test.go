package bench

import (
	"flag"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/lockrun/lockrun/internal/lockruntest"
)

var (
	binary   = flag.String("lockrun", "", "the lockrun binary to measure (default: built from this checkout)")
	baseline = flag.String("baseline", "", "another lockrun binary to compare it with (measure 0)")
	backends = flag.String("backends", "", "comma-separated backends to measure (default: all)")
	measures = flag.String("measures", "", "comma-separated numbers of the measures to run (default: all)")
	out      = flag.String("out", "", "also write the report to this file")
	runs     = flag.Int("overhead-runs", 0, "runs of each command in measure 1 (default 60)")
)

// BenchmarkReport measures lockrun against its peers on every backend and
// prints the report. It ignores b.N: run it with -benchtime 1x.
//
//	go test -run '^$' -bench Report -benchtime 1x ./cmd/lockrun/bench [-short] [-args -lockrun bin/lockrun]
func BenchmarkReport(b *testing.B) {
	cfg := Config{Lockrun: *binary, Baseline: *baseline, Stamp: lockruntest.Build(b, "tests/bench/stamp"), Short: testing.Short(), OverheadRuns: *runs}
	if cfg.Lockrun == "" {
		cfg.Lockrun = lockruntest.Binary(b)
	}
	if *backends != "" {
		cfg.Backends = strings.Split(*backends, ",")
	}
	for _, m := range strings.Split(*measures, ",") {
		if n, err := strconv.Atoi(m); err == nil {
			cfg.Measures = append(cfg.Measures, n)
		}
	}
	w := io.Writer(os.Stdout)
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		w = io.MultiWriter(os.Stdout, f)
	}
	for b.Loop() {
		Report(b, cfg, w)
	}
}
