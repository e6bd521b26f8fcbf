package redis

import (
	_ "embed"

	goredis "github.com/redis/go-redis/v9"
)

// The Lua scripts that make every change to a lock atomic on the server.
var (
	//go:embed lua/lib.lua
	libLua string
	//go:embed lua/sem.lua
	semLua string
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/force.lua
	forceLua string
	//go:embed lua/holder.lua
	holderLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/revoke.lua
	revokeLua string
	//go:embed lua/sem_acquire.lua
	semAcquireLua string
	//go:embed lua/sem_renew.lua
	semRenewLua string
	//go:embed lua/sem_release.lua
	semReleaseLua string
	//go:embed lua/sem_leave.lua
	semLeaveLua string
)

// scripts are loaded once per Backend. go-redis runs each with EVALSHA and
// falls back to EVAL when the server has not seen it yet (a new or
// restarted server), so the usual cost is one round trip.
type scripts struct {
	acquire, renew, release, force, holder, inspect, revoke *goredis.Script
	// The semaphore's own (AcquireOptions.Limit > 1): see semaphore.go.
	semAcquire, semRenew, semRelease, semLeave *goredis.Script
}

func newScripts() scripts {
	lib := libLua + semLua
	return scripts{
		acquire:    goredis.NewScript(lib + acquireLua),
		renew:      goredis.NewScript(libLua + renewLua),
		release:    goredis.NewScript(libLua + releaseLua),
		force:      goredis.NewScript(lib + forceLua),
		holder:     goredis.NewScript(lib + holderLua),
		inspect:    goredis.NewScript(lib + inspectLua),
		revoke:     goredis.NewScript(lib + revokeLua),
		semAcquire: goredis.NewScript(lib + semAcquireLua),
		semRenew:   goredis.NewScript(lib + semRenewLua),
		semRelease: goredis.NewScript(lib + semReleaseLua),
		semLeave:   goredis.NewScript(lib + semLeaveLua),
	}
}
