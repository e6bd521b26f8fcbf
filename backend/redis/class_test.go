package redis

import (
	"errors"
	"testing"

	"github.com/lockrun/lockrun/backend"
)

// replyErr is an error reply as go-redis returns it (goredis.Error).
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// A command that a script calls and an ACL refuses is worded one way by
// Redis 7.0 (the servers here) and another by 7.2 and Valkey: both are
// permission errors, not outages.
func TestClassOfRefusalsInScripts(t *testing.T) {
	for msg, want := range map[string]error{
		"ERR The user executing the script can't run this command or subcommand script: 02f2, on @user_script:6.":           backend.ErrPermission,
		"ERR ACL failure in script: User app has no permissions to run the 'time' command script: 02f2, on @user_script:6.": backend.ErrPermission,
		"NOPERM User app has no permissions to access one of the keys used as arguments":                                    backend.ErrPermission,
		"LOADING Redis is loading the dataset in memory":                                                                    backend.ErrUnavailable,
	} {
		if got := class(replyErr(msg)); !errors.Is(got, want) {
			t.Errorf("class(%q) = %v; want %v", msg, got, want)
		}
	}
}
