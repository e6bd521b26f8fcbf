// Command gendocs writes lockrun's man page, lockrun(1), and its bash, zsh
// and fish completions from the command line's own definition
// (app.Definition). It is a build tool, run by `make build` and the
// release: the shipped binary is built without urfave/cli's doc
// generators and never contains this code.
//
//	go run ./internal/gendocs -out bin -version v1.2.3 -date 2026-12-01
//
// writes bin/lockrun.1 (and lockrun.1.gz, as packages install it) and
// bin/completions/{lockrun.bash,_lockrun,lockrun.fish}.
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/lockrun/lockrun/internal/app"
)

func main() {
	out := flag.String("out", "bin", "directory to write lockrun.1 and completions/ into")
	version := flag.String("version", "dev", "version named in the man page's footer")
	date := flag.String("date", "", "date in the man page's footer: 2026-12-01, or a time from it on (2026-12-01T08:27:19Z)")
	flag.Parse()
	day, _, _ := strings.Cut(*date, "T")
	if err := write(*out, page{Version: *version, Date: day}); err != nil {
		fmt.Fprintf(os.Stderr, "gendocs: %v\n", err)
		os.Exit(1)
	}
}

// write generates every file under dir.
func write(dir string, p page) error {
	def := describe(app.Definition())
	files := map[string]string{
		"lockrun.1":                manPage(def, p),
		"completions/lockrun.bash": bashCompletion(def),
		"completions/_lockrun":     zshCompletion(def),
		"completions/lockrun.fish": fishCompletion(def),
	}
	gz, err := gzipped(files["lockrun.1"])
	if err != nil {
		return err
	}
	files["lockrun.1.gz"] = gz
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// gzipped is text compressed as Debian wants man pages: best compression,
// no name or time in the header, so a rebuild gives the same bytes.
func gzipped(text string) (string, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return "", err
	}
	if _, err := zw.Write([]byte(text)); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}
