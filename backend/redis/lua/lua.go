// Package lua holds the Lua helpers that lockrun's Redis-based backends
// (redis, redlock) put in front of their scripts: Redis has no script
// includes, so each backend embeds this text once per script. It is not
// an API.
package lua

import _ "embed"

// Lib defines now_us, int and wake_next (see lib.lua).
//
//go:embed lib.lua
var Lib string
