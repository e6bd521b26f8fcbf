package app

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/buildinfo"
	"github.com/lockrun/lockrun/internal/delegate"
)

// takeDelegation removes delegate.Var from the environment; a program
// started by one of another release is an error.
func (st *state) takeDelegation() error {
	from, ok := os.LookupEnv(delegate.Var)
	if !ok {
		return nil
	}
	os.Unsetenv(delegate.Var)
	from, st.chain = delegate.ParseMark(from)
	if own := buildinfo.Version(); from != own {
		exe, _ := os.Executable()
		return fmt.Errorf("%w: %s (%s) was started by a lockrun from another release (%s=%s); install all of the programs from the same one", backend.ErrConfig, filepath.Base(exe), own, delegate.Var, from)
	}
	return nil
}

// delegate replaces this process with prog, from this program's own
// directory, with the same arguments and environment: prog opens the
// backend and does the rest. What lockrun has said so far is dropped, not
// flushed: prog says it again. It returns only when it cannot.
func (st *state) delegate(prog string) error {
	if err := delegate.Exec(prog, st.args, st.chain); err != nil {
		return fmt.Errorf("%w: %w", backend.ErrConfig, err)
	}
	return nil
}
