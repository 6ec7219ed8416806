package mcp

import (
	"os"
	"runtime"
	"sort"
)

// baseEnv names what a server inherits from octet's environment: enough
// to find programs, a home, a locale and a temporary directory. Nothing
// else (API keys, tokens, a user's other variables) reaches it; a server
// that needs more gets it through its env table.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"}

// windowsEnv is what Windows programs need to start at all.
var windowsEnv = []string{"SYSTEMROOT", "SystemRoot", "ComSpec", "PATHEXT", "TEMP", "TMP", "USERPROFILE", "APPDATA", "LOCALAPPDATA", "ProgramData", "ProgramFiles", "WINDIR"}

// serverEnv is a stdio server's environment: the minimal inherited set,
// then the configured env table, in a stable order.
func serverEnv(extra map[string]string) []string {
	vars := map[string]string{}
	names := baseEnv
	if runtime.GOOS == "windows" {
		names = append(names[:len(names):len(names)], windowsEnv...)
	}
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			vars[n] = v
		}
	}
	for k, v := range extra {
		vars[k] = v
	}
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+vars[k])
	}
	return out
}
