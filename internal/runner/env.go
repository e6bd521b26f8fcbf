package runner

import "strings"

// envPrefix marks lockrun's own variables: inherited ones are dropped from
// the child's environment, since they may carry lockrun's credentials (a
// LOCKRUN_BACKEND URL with a password), and ours are set in their place.
const envPrefix = "LOCKRUN_"

// secretEnv are credentials that a backend reads from lockrun's own
// environment, outside LOCKRUN_*: they are not the command's to see.
var secretEnv = []string{"REDISCLI_AUTH="}

// childEnv is base without any LOCKRUN_* variable or secretEnv, plus vars.
func childEnv(base []string, vars map[string]string) []string {
	env := make([]string, 0, len(base)+len(vars))
	for _, kv := range base {
		if !strings.HasPrefix(kv, envPrefix) && !isSecret(kv) {
			env = append(env, kv)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

func isSecret(kv string) bool {
	for _, s := range secretEnv {
		if strings.HasPrefix(kv, s) {
			return true
		}
	}
	return false
}
