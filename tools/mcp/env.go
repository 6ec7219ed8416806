package mcp

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// baseEnv names what a server inherits from octet's environment: enough
// to find programs, a home, a locale and a temporary directory. Nothing
// else (API keys, tokens, a user's other variables) reaches it; a server
// that needs more gets it through its env table.
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"}

// windowsEnv is what Windows programs need to start at all.
var windowsEnv = []string{"SYSTEMROOT", "SystemRoot", "ComSpec", "PATHEXT", "TEMP", "TMP", "USERPROFILE", "APPDATA", "LOCALAPPDATA", "ProgramData", "ProgramFiles", "WINDIR"}

// serverEnv is a stdio server's environment: the minimal inherited set,
// then the configured env table, in a stable order. Its PATH keeps only
// absolute entries outside workspace: a program the server runs by name
// is never one the workspace provides.
func serverEnv(extra map[string]string, workspace string) []string {
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
	for _, k := range []string{"PATH", "Path"} {
		if v, ok := vars[k]; ok {
			vars[k] = outsidePath(v, workspace)
		}
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

// outsidePath is the PATH list without its relative entries (the empty
// entry, ".", "bin" name the working directory) and without entries
// inside workspace.
func outsidePath(list, workspace string) string {
	var keep []string
	for _, dir := range filepath.SplitList(list) {
		if filepath.IsAbs(dir) && !within(dir, workspace) {
			keep = append(keep, dir)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

// within reports whether dir is workspace or inside it, as written or
// with links resolved.
func within(dir, workspace string) bool {
	if workspace == "" {
		return false
	}
	if inside(filepath.Clean(dir), filepath.Clean(workspace)) {
		return true
	}
	rd, err1 := filepath.EvalSymlinks(dir)
	rw, err2 := filepath.EvalSymlinks(workspace)
	return err1 == nil && err2 == nil && inside(rd, rw)
}

func inside(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// pathOf is the PATH value of env ("" when it has none).
func pathOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			return v
		}
		if v, ok := strings.CutPrefix(kv, "Path="); ok {
			return v
		}
	}
	return ""
}
