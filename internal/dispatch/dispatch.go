// Package dispatch is imported by lockrun's main package alone, for its
// init: a command line that names a server backend starts the program
// with that backend's client (delegate.Dispatch) before lockrun's other
// packages initialise, which would be work thrown away. Go initialises a
// package as soon as its imports are, in the order of import paths, so
// this one comes before the CLI, slog, net and the file backend's.
package dispatch

import (
	"os"

	"github.com/lockrun/lockrun/internal/delegate"
)

func init() { delegate.Dispatch(os.Args) }
