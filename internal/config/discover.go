package config

import (
	"os"
	"path/filepath"
	"slices"
)

// MaxProjectDepth bounds how many directories above the workspace octet
// looks for the repository root.
const MaxProjectDepth = 32

// ProjectDirs returns the directories whose AGENTS.md and
// .octet/config.toml octet reads for workspace (an absolute path),
// outermost first: the repository root — the nearest directory at or
// above workspace that holds a .git entry (a directory, or the file of
// a worktree or submodule), at most MaxProjectDepth levels up — and each
// directory below it down to workspace. Without a repository root within
// reach it is workspace alone. The walk is lexical (the path the user is
// in); each file is then read beneath its own directory without
// following links (readConfined).
func ProjectDirs(workspace string) []string {
	ws := filepath.Clean(workspace)
	chain := []string{ws}
	for dir := ws; len(chain) <= MaxProjectDepth+1; {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			slices.Reverse(chain)
			return chain
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
		chain = append(chain, dir)
	}
	return []string{ws}
}

// isHomeConfigDir reports whether dir's .octet directory is home itself
// ($OCTET_HOME, by default ~/.octet): a repository at the user's home
// directory (dotfiles) must not have the user's own config read again as
// a project's.
func isHomeConfigDir(dir, home string) bool {
	if home == "" {
		return false
	}
	p := filepath.Join(dir, ".octet")
	if p == filepath.Clean(home) {
		return true
	}
	a, err1 := os.Stat(p)
	b, err2 := os.Stat(home)
	return err1 == nil && err2 == nil && os.SameFile(a, b)
}
