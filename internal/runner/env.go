package runner

import "strings"

// envPrefix marks lockrun's own variables: inherited ones are dropped from
// the child's environment, since they may carry lockrun's credentials (a
// LOCKRUN_BACKEND URL with a password), and ours are set in their place.
const envPrefix = "LOCKRUN_"

// childEnv is base without any LOCKRUN_* variable, plus vars.
func childEnv(base []string, vars map[string]string) []string {
	env := make([]string, 0, len(base)+len(vars))
	for _, kv := range base {
		if !strings.HasPrefix(kv, envPrefix) {
			env = append(env, kv)
		}
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}
