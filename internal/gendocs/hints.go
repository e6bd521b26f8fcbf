package main

import "slices"

// valueHints are the values a shell offers after a flag, by the flag's long
// name; a flag not named here takes free text. The test checks that every
// name here is a flag of lockrun's.
var valueHints = map[string][]string{
	"backend":    {"file:///", "redis://", "rediss://", "etcd://", "etcds://", "postgres://", "postgresql://"},
	"log-format": {"text", "json"},
	"log":        {"stderr", "syslog", "journald"},
}

// globalFlags are those urfave/cli adds to the app itself.
var globalFlags = []option{
	{Names: []string{"help", "h"}, Usage: "show help"},
	{Names: []string{"verbose", "v"}, Usage: "verbose, for every command: 'lockrun -v run' is 'lockrun run -v'"},
	{Names: []string{"version", "V"}, Usage: "print the version"},
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
