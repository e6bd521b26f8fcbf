// Package lua holds the Lua helpers that lockrun's Redis-based backends
// (redis, redlock) put in front of their scripts: Redis has no script
// includes, so each backend embeds this text once per script. It is not
// an API.
package lua

import _ "embed"

// Lib defines now_us, int, next_token, wake_next, record and restart_left
// (see lib.lua).
//
//go:embed lib.lua
var Lib string

// Sem defines the semaphore helpers (see sem.lua); it goes after Lib.
//
//go:embed sem.lua
var Sem string

// SemLeave is the script that takes a waiter out of a semaphore's queue
// (see sem_leave.lua); it goes after Lib and Sem.
//
//go:embed sem_leave.lua
var SemLeave string
