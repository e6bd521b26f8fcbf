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
	//go:embed lua/holder.lua
	holderLua string
	//go:embed lua/inspect.lua
	inspectLua string
	//go:embed lua/revoke.lua
	revokeLua string
	//go:embed lua/ended.lua
	endedLua string
	//go:embed lua/sem_peek.lua
	semPeekLua string
	//go:embed lua/sem_grant.lua
	semGrantLua string
	//go:embed lua/sem_renew.lua
	semRenewLua string
	//go:embed lua/sem_release.lua
	semReleaseLua string
)

// scripts are loaded once per Backend; go-redis runs each with EVALSHA and
// falls back to EVAL on a master that has not seen it (a restarted one).
type scripts struct {
	peek, grant, renew, release, force, holder, inspect, revoke *goredis.Script
	// The semaphore's own (AcquireOptions.Limit > 1): see semaphore.go.
	semPeek, semGrant, semRenew, semRelease, semLeave *goredis.Script
}

func newScripts() scripts {
	lib := lua.Lib + lua.Sem
	return scripts{
		peek:       goredis.NewScript(lib + peekLua),
		grant:      goredis.NewScript(lib + endedLua + grantLua),
		renew:      goredis.NewScript(lua.Lib + endedLua + renewLua),
		release:    goredis.NewScript(lua.Lib + endedLua + releaseLua),
		force:      goredis.NewScript(lib + endedLua + forceLua),
		holder:     goredis.NewScript(lib + endedLua + holderLua),
		inspect:    goredis.NewScript(lib + inspectLua),
		revoke:     goredis.NewScript(lib + endedLua + revokeLua),
		semPeek:    goredis.NewScript(lib + semPeekLua),
		semGrant:   goredis.NewScript(lib + semGrantLua),
		semRenew:   goredis.NewScript(lib + semRenewLua),
		semRelease: goredis.NewScript(lib + semReleaseLua),
		semLeave:   goredis.NewScript(lib + lua.SemLeave),
	}
}
