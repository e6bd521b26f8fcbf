package redlock

import (
	_ "embed"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/backend/redis/lua"
)

// The Lua scripts that make every change on a master atomic there.
var (
	//go:embed lua/peek.lua
	peekLua string
	//go:embed lua/grant.lua
	grantLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/force.lua
	forceLua string
	//go:embed lua/inspect.lua
	inspectLua string
)

// scripts are loaded once per Backend; go-redis runs each with EVALSHA and
// falls back to EVAL on a master that has not seen it (a restarted one).
type scripts struct {
	peek, grant, renew, release, force, inspect *goredis.Script
}

func newScripts() scripts {
	return scripts{
		peek:    goredis.NewScript(lua.Lib + peekLua),
		grant:   goredis.NewScript(lua.Lib + grantLua),
		renew:   goredis.NewScript(lua.Lib + renewLua),
		release: goredis.NewScript(lua.Lib + releaseLua),
		force:   goredis.NewScript(lua.Lib + forceLua),
		inspect: goredis.NewScript(inspectLua),
	}
}
