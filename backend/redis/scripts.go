package redis

import (
	_ "embed"

	goredis "github.com/redis/go-redis/v9"
)

// The Lua scripts that make every change to a lock atomic on the server.
var (
	//go:embed lua/lib.lua
	libLua string
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/force.lua
	forceLua string
	//go:embed lua/inspect.lua
	inspectLua string
)

// scripts are loaded once per Backend. go-redis runs each with EVALSHA and
// falls back to EVAL when the server has not seen it yet (a new or
// restarted server), so the usual cost is one round trip.
type scripts struct {
	acquire, renew, release, force, inspect *goredis.Script
}

func newScripts() scripts {
	return scripts{
		acquire: goredis.NewScript(libLua + acquireLua),
		renew:   goredis.NewScript(libLua + renewLua),
		release: goredis.NewScript(libLua + releaseLua),
		force:   goredis.NewScript(libLua + forceLua),
		inspect: goredis.NewScript(inspectLua),
	}
}
